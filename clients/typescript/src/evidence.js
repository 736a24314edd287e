// Equivocation evidence (testvectors/FORMATS.md, "Equivocation evidence"):
// two checkpoints of one log, signed by its key, that cannot both be true:
// one size and two roots, or a consistency proof showing that the larger
// tree's prefix of the smaller size has another root than the smaller
// checkpoint's. What a witness writes and anyone checks offline with the
// log's key alone; the checks and messages of Annal's Go verifier
// (verifier/evidence.go).

import { openCheckpoint, parseHash } from "./checkpoint.js";
import { abbreviate, bytesOf, equalBytes, goQuote } from "./encoding.js";
import { readStrictJSON } from "./entry.js";
import { VerificationError, within } from "./errors.js";
import { verifyConsistency } from "./merkle.js";
import { MAX_PROOF_HASHES, logVerifier } from "./proof.js";

export const EVIDENCE_FORMAT = "annal.dev/equivocation-evidence/v1";
export const MAX_EVIDENCE_SIZE = 48 << 10;
const MEMBERS = ["format", "origin", "log_key", "checkpoints", "prefix_root", "consistency_proof", "observations"];
const OBSERVATION_MEMBERS = ["checkpoint", "by", "at"];

const fail = (/** @type {string} */ check, /** @type {string} */ why) => new VerificationError(check, why);
const ab = (/** @type {string} */ s) => abbreviate(s, 80);

/**
 * Verifies an equivocation evidence file. logKey, if given, is the log
 * key the caller trusts and must be the file's; else the file's key is
 * used, and the result proves that whoever holds it signed two histories.
 * @param {string | Uint8Array} data
 * @param {string} [logKey]
 */
export async function verifyEvidence(data, logKey) {
  const ev = decodeEvidence(bytesOf(data));
  if (logKey && logKey !== ev.log_key) {
    throw fail("verifier key", `the evidence is about key ${goQuote(ab(ev.log_key))}, not the trusted key ${goQuote(ab(logKey))}`);
  }
  const v = await logVerifier(ev.log_key);
  if (v.name !== ev.origin) throw fail("verifier key", `log key ${goQuote(v.name)} does not name origin ${goQuote(ev.origin)}`);
  const cps = [];
  for (const [i, note] of ev.checkpoints.entries()) {
    cps.push(await within("checkpoint signature", () => openCheckpoint(note, v).catch((e) => Promise.reject(new Error(`checkpoint ${i + 1}: ${e.message}`)))));
  }
  const [a, b] = cps;
  const result = { origin: ev.origin, logKey: ev.log_key, sizes: [a.size, b.size], roots: [a.rootHash, b.rootHash], prefixRoot: /** @type {Uint8Array | undefined} */ (undefined) };
  if (a.size > b.size) throw fail("evidence", `the checkpoints are not in order: ${a.size} entries before ${b.size}`);
  if (a.size === 0n) throw fail("evidence", "a checkpoint of no entries cannot be contradicted by another");
  if (a.size === b.size) {
    if (equalBytes(a.rootHash, b.rootHash)) throw fail("evidence", `both checkpoints have size ${a.size} and the same root: no equivocation`);
    if (ev.prefix_root || (ev.consistency_proof ?? []).length > 0) throw fail("proof format", "checkpoints of one size need no prefix root or proof");
    return result;
  }
  let prefix;
  try {
    prefix = parseHash(ev.prefix_root ?? "");
  } catch (e) {
    throw fail("proof format", `prefix_root: ${/** @type {Error} */ (e).message}`);
  }
  const proof = ev.consistency_proof ?? [];
  if (proof.length > MAX_PROOF_HASHES) throw fail("proof format", `consistency proof has ${proof.length} hashes, more than ${MAX_PROOF_HASHES}`);
  const hashes = proof.map((h, i) => {
    try {
      return parseHash(h);
    } catch (e) {
      throw fail("proof format", `consistency proof hash ${i + 1} is not a base64 SHA-256 hash: ${/** @type {Error} */ (e).message}`);
    }
  });
  try {
    await verifyConsistency(a.size, b.size, hashes, prefix, b.rootHash);
  } catch (e) {
    throw fail("consistency",
      `the proof does not show that the tree of ${b.size} entries has root ${ev.prefix_root} at ${a.size}: ${/** @type {Error} */ (e).message}`);
  }
  if (equalBytes(prefix, a.rootHash)) {
    throw fail("evidence", `the larger tree's first ${a.size} entries have the smaller checkpoint's root: the checkpoints are consistent`);
  }
  result.prefixRoot = prefix;
  return result;
}

/**
 * Decodes an evidence file strictly: within its size, UTF-8 JSON without
 * duplicate, unknown or misspelt members, of this format.
 * @param {Uint8Array} raw
 * @returns {{format: string, origin: string, log_key: string, checkpoints: string[], prefix_root?: string,
 *   consistency_proof?: string[], observations?: {checkpoint: number, by: string, at: string}[]}}
 */
function decodeEvidence(raw) {
  if (raw.length > MAX_EVIDENCE_SIZE) throw fail("proof format", `evidence is ${raw.length} bytes, more than ${MAX_EVIDENCE_SIZE}`);
  /** @type {any} */
  let ev;
  try {
    ev = readStrictJSON(raw, "evidence");
  } catch (e) {
    throw fail("proof format", /** @type {Error} */ (e).message);
  }
  const object = (/** @type {unknown} */ v) => v !== null && typeof v === "object" && !Array.isArray(v);
  if (!object(ev)) throw fail("proof format", "evidence is not an evidence object");
  known("evidence", ev, MEMBERS);
  for (const name of ["format", "origin", "log_key", "prefix_root"]) {
    if (name in ev && typeof ev[name] !== "string") throw fail("proof format", `evidence is not an evidence object: ${name} is not a string`);
  }
  const strings = (/** @type {unknown} */ v) => Array.isArray(v) && v.every((x) => typeof x === "string");
  if (!strings(ev.checkpoints) || ev.checkpoints.length !== 2) throw fail("proof format", "evidence is not an evidence object: checkpoints is not two notes");
  if ("consistency_proof" in ev && !strings(ev.consistency_proof)) throw fail("proof format", "evidence is not an evidence object: consistency_proof is not a list of hashes");
  if ("observations" in ev) {
    if (!Array.isArray(ev.observations)) throw fail("proof format", "evidence is not an evidence object: observations is not a list");
    for (const [i, o] of ev.observations.entries()) {
      if (!object(o)) throw fail("proof format", `evidence is not an evidence object: observation ${i + 1} is not an object`);
      known(`observation ${i + 1}`, o, OBSERVATION_MEMBERS);
    }
  }
  if (ev.format !== EVIDENCE_FORMAT) throw fail("proof format", `format ${goQuote(ev.format ?? "")} is not ${goQuote(EVIDENCE_FORMAT)}`);
  return ev;
}

/** Refuses a member the format does not declare. @param {string} what @param {object} obj @param {string[]} names */
function known(what, obj, names) {
  for (const name of Object.keys(obj)) {
    if (!names.includes(name)) {
      throw fail("proof format", `${what} has the member ${goQuote(ab(name))}, which its format does not declare (member names are case-sensitive)`);
    }
  }
}
