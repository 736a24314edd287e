// Byte encodings of FORMATS.md ("Conventions"): strict base64, lower-case
// hex, canonical decimals. Every value has exactly one spelling, so each
// decoder refuses every other one, with the messages Annal's Go reader gives.

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_INDEX = new Map([...B64].map((c, i) => [c, i]));
const MAX_UINT64 = (1n << 64n) - 1n;

/** @param {Uint8Array} bytes */
export function encodeBase64(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
    out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : "=";
    out += i + 2 < bytes.length ? B64[n & 63] : "=";
  }
  return out;
}

/**
 * Decodes standard base64 with padding. Lenient mode (what a signed note's
 * parser accepts) lets non-zero padding bits through; strict mode refuses
 * them too, as Go's base64.StdEncoding.Strict() does. The error names the
 * offending byte as Go's decoder does (its decodeQuantum, ported).
 * @param {string} s
 * @param {boolean} [strict]
 * @returns {Uint8Array}
 */
export function decodeBase64(s, strict = true) {
  const src = utf8.encode(s);
  const corrupt = (/** @type {number} */ at) => new Error(`illegal base64 data at input byte ${at}`);
  /** @type {number[]} */
  const out = [];
  let si = 0;
  while (si < src.length) {
    const dbuf = [0, 0, 0, 0];
    let dlen = 4;
    let trailing = -1;
    for (let j = 0; j < 4; j++) {
      if (si === src.length) {
        if (j === 0) return Uint8Array.from(out);
        throw corrupt(si - j);
      }
      const c = src[si++];
      const v = c < 128 ? B64_INDEX.get(String.fromCharCode(c)) : undefined;
      if (v !== undefined) {
        dbuf[j] = v;
        continue;
      }
      if (c !== 0x3d) throw corrupt(si - 1);
      if (j < 2) throw corrupt(si - 1);
      if (j === 2) {
        if (si === src.length) throw corrupt(src.length);
        if (src[si] !== 0x3d) throw corrupt(si - 1);
        si++;
      }
      if (si < src.length) trailing = si;
      dlen = j;
      break;
    }
    const val = (dbuf[0] << 18) | (dbuf[1] << 12) | (dbuf[2] << 6) | dbuf[3];
    const b = [(val >> 16) & 255, (val >> 8) & 255, val & 255];
    if (dlen === 3 && strict && b[2] !== 0) throw corrupt(si - 1);
    if (dlen === 2 && strict && (b[1] !== 0 || b[2] !== 0)) throw corrupt(si - 2);
    out.push(...b.slice(0, dlen - 1));
    if (trailing >= 0) throw corrupt(trailing);
  }
  return Uint8Array.from(out);
}

/** @param {Uint8Array} bytes */
export function toHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** @param {string} s */
export function fromHex(s) {
  if (!/^(?:[0-9a-f]{2})*$/.test(s)) throw new Error(`${goQuote(s)} is not lower-case hex`);
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/**
 * Parses a FORMATS.md decimal: an unsigned 64-bit integer, no sign, no
 * leading zero. Sizes and indexes are bigint because they may exceed 2^53.
 * @param {string} s
 * @returns {bigint}
 */
export function parseDecimal(s) {
  if (s === "") throw new Error("empty number");
  if (s.length > 1 && s[0] === "0") throw new Error(`number ${goQuote(abbreviate(s))} has a leading zero`);
  if (!/^[0-9]+$/.test(s)) throw new Error(`number ${goQuote(abbreviate(s))} is not plain decimal`);
  const n = BigInt(s);
  if (n > MAX_UINT64) throw new Error(`number ${goQuote(abbreviate(s))} does not fit in 64 bits`);
  return n;
}

/**
 * Shortens s for an error message, as the Go reader does (64 bytes).
 * @param {string} s
 */
export function abbreviate(s, max = 64) {
  return s.length > max ? s.slice(0, max - 3) + "..." : s;
}

const GO_ESCAPES = /** @type {Record<string, string>} */ ({
  "\u0007": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", '"': '\\"', "\\": "\\\\",
});

// What Go's strconv.IsPrint calls not printable: other (control, format,
// private use, unassigned) and separators but the ASCII space.
const NOT_PRINTABLE = /^[\p{C}\p{Z}]$/u;

/** Quotes s as Go's %q does (control characters as \\a, \\x00, \\u0085, …). */
export function goQuote(/** @type {string} */ s) {
  let out = '"';
  for (const c of s) {
    const n = /** @type {number} */ (c.codePointAt(0));
    if (GO_ESCAPES[c]) out += GO_ESCAPES[c];
    else if (n < 0x20 || n === 0x7f) out += "\\x" + n.toString(16).padStart(2, "0");
    else if (n > 0x7f && NOT_PRINTABLE.test(c)) out += n < 0x10000 ? "\\u" + n.toString(16).padStart(4, "0") : "\\U" + n.toString(16).padStart(8, "0");
    else out += c;
  }
  return out + '"';
}

export const utf8 = new TextEncoder();
// ignoreBOM keeps a leading U+FEFF in the text: Go reads it as a character, not a mark to drop.
const strictDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * @param {string | Uint8Array} input
 * @returns {Uint8Array}
 */
export function bytesOf(input) {
  return typeof input === "string" ? utf8.encode(input) : input;
}

/**
 * Decodes UTF-8, or returns undefined when the bytes are not valid UTF-8.
 * @param {Uint8Array} bytes
 */
export function decodeUTF8(bytes) {
  try {
    return strictDecoder.decode(bytes);
  } catch {
    return undefined;
  }
}

/** @param {Uint8Array} a @param {Uint8Array} b */
export function equalBytes(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** @param {Uint8Array[]} parts */
export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** The OID of content: "sha256:" and the lower-case hex SHA-256 of its bytes (a string as UTF-8), as blobstore.OID. @param {Uint8Array | string} bytes */
export async function oidOf(bytes) {
  return "sha256:" + toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", /** @type {BufferSource} */ (bytesOf(bytes)))));
}
