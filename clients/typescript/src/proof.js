// Single-entry proofs (c2sp.org/tlog-proof@v1) and consistency proofs, and
// their offline verification against a log's verifier key: what
// `annal verify` does, in the same order and with the same messages.

import { VerificationError, within } from "./errors.js";
import { abbreviate, bytesOf, decodeBase64, encodeBase64, goQuote, parseDecimal, toHex } from "./encoding.js";
import { openCheckpoint, parseHash, validateOrigin as validateOriginName } from "./checkpoint.js";
import { leafHash, verifyConsistency as merkleConsistency, verifyInclusion } from "./merkle.js";
import { KEY_ED25519, newVerifier } from "./note.js";
import { readEntryJSON } from "./entry.js";

export const TLOG_PROOF_HEADER = "c2sp.org/tlog-proof@v1";
export const MAX_PROOF_HASHES = 64;
export const MAX_TLOG_PROOF_SIZE = 128 << 10;

/**
 * @typedef {object} TLogProof
 * @property {Uint8Array} [extra]
 * @property {bigint} index
 * @property {Uint8Array[]} hashes
 * @property {Uint8Array} checkpoint
 */

/**
 * Parses a c2sp.org/tlog-proof@v1.
 * @param {string | Uint8Array} data
 * @returns {TLogProof}
 */
export function parseTLogProof(data) {
  const raw = bytesOf(data);
  if (raw.length > MAX_TLOG_PROOF_SIZE) {
    throw new Error(`tlog-proof is ${raw.length} bytes, more than the limit of ${MAX_TLOG_PROOF_SIZE}`);
  }
  let off = 0;
  const next = () => {
    const i = raw.indexOf(0x0a, off);
    if (i < 0) return undefined;
    const l = new TextDecoder("utf-8", { ignoreBOM: true }).decode(raw.subarray(off, i));
    off = i + 1;
    return l;
  };
  let l = next();
  if (l !== TLOG_PROOF_HEADER) throw new Error(`tlog-proof does not start with the line ${goQuote(TLOG_PROOF_HEADER)}`);
  if ((l = next()) === undefined) throw new Error("tlog-proof ends after its header");
  /** @type {TLogProof} */
  const p = { index: 0n, hashes: [], checkpoint: new Uint8Array() };
  if (l.startsWith("extra ")) {
    try {
      p.extra = decodeBase64(l.slice(6));
    } catch (e) {
      throw new Error(`tlog-proof extra data is not standard base64: ${/** @type {Error} */ (e).message}`);
    }
    if ((l = next()) === undefined) throw new Error("tlog-proof ends after its extra line");
  }
  if (!l.startsWith("index ")) throw new Error(`tlog-proof line ${goQuote(abbreviate(l))} is not "index <n>"`);
  try {
    p.index = parseDecimal(l.slice(6));
  } catch (e) {
    throw new Error(`tlog-proof index: ${/** @type {Error} */ (e).message}`);
  }
  for (;;) {
    l = next();
    if (l === undefined) throw new Error("tlog-proof has no empty line before its checkpoint");
    if (l === "") break;
    if (p.hashes.length === MAX_PROOF_HASHES) throw new Error(`tlog-proof has more than ${MAX_PROOF_HASHES} hashes`);
    try {
      p.hashes.push(parseHash(l));
    } catch (e) {
      throw new Error(`tlog-proof hash ${p.hashes.length + 1}: ${/** @type {Error} */ (e).message}`);
    }
  }
  if (off === raw.length) throw new Error("tlog-proof has no checkpoint");
  p.checkpoint = raw.slice(off);
  return p;
}

/** Writes a tlog-proof. @param {TLogProof} p */
export function marshalTLogProof(p) {
  let s = TLOG_PROOF_HEADER + "\n";
  if (p.extra) s += `extra ${encodeBase64(p.extra)}\n`;
  s += `index ${p.index}\n` + p.hashes.map((h) => encodeBase64(h) + "\n").join("") + "\n";
  return s + new TextDecoder("utf-8", { ignoreBOM: true }).decode(p.checkpoint);
}

/**
 * Parses a consistency proof: one base64 hash per line.
 * @param {string | Uint8Array} data
 */
export function parseHashes(data) {
  const text = typeof data === "string" ? data : new TextDecoder("utf-8", { ignoreBOM: true }).decode(data);
  if (text === "") return [];
  if (!text.endsWith("\n")) throw new Error("proof does not end with a newline");
  const lines = text.slice(0, -1).split("\n");
  if (lines.length > MAX_PROOF_HASHES) throw new Error(`proof has ${lines.length} hashes, more than ${MAX_PROOF_HASHES}`);
  return lines.map((l, i) => {
    try {
      return parseHash(l);
    } catch (e) {
      throw new Error(`proof line ${i + 1}: ${/** @type {Error} */ (e).message}`);
    }
  });
}

/**
 * Reads a log's verifier key <name>+<hash>+<key>.
 * @param {string} vkey
 */
export async function logVerifier(vkey) {
  vkey = vkey.trim();
  if (vkey.split("+").length - 1 < 2) {
    throw new VerificationError("verifier key", `${goQuote(abbreviate(vkey, 80))} is not a note verifier key <name>+<hash>+<key>`);
  }
  return within("verifier key", async () => {
    const v = await newVerifier(vkey);
    // A log signs with a plain Ed25519 note key; x/mod's note knows no other.
    if (v.type !== KEY_ED25519) throw new Error(`log verifier key ${goQuote(abbreviate(vkey))}: unknown verifier algorithm`);
    try {
      validateOriginName(v.name);
    } catch (e) {
      throw new Error(`log verifier key: ${/** @type {Error} */ (e).message}`);
    }
    return v;
  });
}

/**
 * @typedef {object} ProofResult
 * @property {string} origin
 * @property {bigint} size
 * @property {Uint8Array} rootHash
 * @property {bigint} index
 * @property {Uint8Array} leafHash
 * @property {import("./checkpoint.js").SignedCheckpoint} checkpoint
 */

/**
 * Verifies offline that entry is in the log whose verifier key is vkey, at
 * the index its tlog-proof names, under the proof's signed checkpoint.
 * The entry must pass readEntryJSON (UTF-8, strict JSON in RFC 8785
 * canonical form); its event fields are not checked here (Annal's Go
 * verifier also parses it as an event).
 * @param {string | Uint8Array} entry
 * @param {string | Uint8Array} tlogProof
 * @param {string} vkey
 * @returns {Promise<ProofResult>}
 */
export async function verifyProof(entry, tlogProof, vkey) {
  const v = await logVerifier(vkey);
  const p = await within("proof format", () => parseTLogProof(tlogProof));
  const cp = await within("checkpoint signature", () => openCheckpoint(p.checkpoint, v));
  if (p.index >= cp.size) {
    throw new VerificationError("index", `index ${p.index} is not inside the checkpoint's ${cp.size} entries`);
  }
  const entryBytes = bytesOf(entry);
  await within("entry", () => readEntryJSON(entryBytes));
  const leaf = await leafHash(entryBytes);
  await within("inclusion", async () => {
    try {
      await verifyInclusion(p.index, cp.size, leaf, p.hashes, cp.rootHash);
    } catch (e) {
      const msg = /** @type {Error} */ (e).message;
      throw new Error(`entry with leaf hash ${toHex(leaf)} is not at index ${p.index} of ${cp.origin} size ${cp.size}: ${msg}`);
    }
  });
  return { origin: cp.origin, size: cp.size, rootHash: cp.rootHash, index: p.index, leafHash: leaf, checkpoint: cp };
}

/**
 * Verifies offline that the log's newer checkpoint extends the older one.
 * @param {string | Uint8Array} oldCheckpoint
 * @param {string | Uint8Array} newCheckpoint
 * @param {string | Uint8Array} proof one base64 hash per line
 * @param {string} vkey
 */
export async function verifyConsistencyProof(oldCheckpoint, newCheckpoint, proof, vkey) {
  const v = await logVerifier(vkey);
  const oldCP = await within("checkpoint signature", () =>
    openCheckpoint(oldCheckpoint, v).catch((e) => Promise.reject(new Error(`old checkpoint: ${e.message}`))),
  );
  const newCP = await within("checkpoint signature", () =>
    openCheckpoint(newCheckpoint, v).catch((e) => Promise.reject(new Error(`new checkpoint: ${e.message}`))),
  );
  if (oldCP.size > newCP.size) {
    throw new VerificationError("consistency", `old checkpoint has ${oldCP.size} entries, more than the new one's ${newCP.size}`);
  }
  const hashes = await within("proof format", () => parseHashes(proof));
  await within("consistency", async () => {
    try {
      await merkleConsistency(oldCP.size, newCP.size, hashes, oldCP.rootHash, newCP.rootHash);
    } catch (e) {
      throw new Error(`size ${oldCP.size} is not a prefix of size ${newCP.size}: ${/** @type {Error} */ (e).message}`);
    }
  });
  return { origin: oldCP.origin, old: oldCP, new: newCP };
}
