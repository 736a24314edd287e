// Random changes of text for the mutation and differential tests.

/** A small deterministic generator (mulberry32), so that a failure repeats. */
export function rng(/** @type {number} */ seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = "\n \u2014+/=0123456789abcdefABCDEF.\r\t\u0000\u00e9\ufeff";

/** Replaces, inserts or deletes one to three characters of s. */
export function mutate(/** @type {string} */ s, /** @type {() => number} */ r) {
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; i++) {
    const at = Math.floor(r() * (s.length + 1));
    const c = ALPHABET[Math.floor(r() * ALPHABET.length)];
    const op = Math.floor(r() * 3);
    s = op === 0 ? s.slice(0, at) + c + s.slice(at + 1) : op === 1 ? s.slice(0, at) + c + s.slice(at) : s.slice(0, at) + s.slice(at + 1);
  }
  return s;
}
