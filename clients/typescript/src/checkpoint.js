// Checkpoints (c2sp.org/tlog-checkpoint) as FORMATS.md restricts them:
// origin, canonical decimal size, 32-byte root hash in strict base64, then
// non-empty extension lines; signed by the log's key under the origin's name.

import { abbreviate, bytesOf, decodeBase64, encodeBase64, goQuote, parseDecimal } from "./encoding.js";
import { InvalidSignatureError, MalformedNoteError, UnverifiedNoteError, isValidKeyName, openNote } from "./note.js";

export const MAX_CHECKPOINT_SIZE = 16 << 10;

/**
 * @typedef {object} Checkpoint
 * @property {string} origin
 * @property {bigint} size
 * @property {Uint8Array} rootHash 32 bytes
 * @property {string[]} extensions
 */

/** @param {string} s the strict base64 of a SHA-256 hash */
export function parseHash(s) {
  let raw;
  try {
    if (/[\r\n]/.test(s)) throw new Error(`line break at offset ${s.search(/[\r\n]/)}`);
    raw = decodeBase64(s);
  } catch (e) {
    throw new Error(`hash ${goQuote(abbreviate(s))} is not standard base64: ${/** @type {Error} */ (e).message}`);
  }
  if (raw.length !== 32) throw new Error(`hash is ${raw.length} bytes, want 32`);
  return raw;
}

const SPACE_OR_CONTROL = /[\u0000-\u0020\u007f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
const CONTROL = /[\u0000-\u001f\u007f]/;

/** @param {string} origin */
export function validateOrigin(origin) {
  if (origin === "") throw new Error("origin is empty");
  if (bytesOf(origin).length > 255) throw new Error(`origin ${goQuote(abbreviate(origin))} is longer than 255 bytes`);
  if (origin.includes("+")) throw new Error(`origin ${goQuote(origin)} contains '+', which a note key name may not`);
  if (SPACE_OR_CONTROL.test(origin)) throw new Error(`origin ${goQuote(origin)} contains a space or control character`);
}

/**
 * Parses a checkpoint's text (the signed body of its note).
 * @param {string} text
 * @returns {Checkpoint}
 */
export function parseCheckpointBody(text) {
  if (!text.endsWith("\n")) throw new Error("checkpoint body does not end with a newline");
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3) {
    throw new Error(`checkpoint body has ${lines.length} lines, want at least 3 (origin, size, root hash)`);
  }
  const prefixed = (/** @type {string} */ what, /** @type {() => any} */ f) => {
    try {
      return f();
    } catch (e) {
      throw new Error(`checkpoint ${what}: ${/** @type {Error} */ (e).message}`);
    }
  };
  prefixed("origin", () => validateOrigin(lines[0]));
  const size = prefixed("size", () => parseDecimal(lines[1]));
  const rootHash = prefixed("root hash", () => parseHash(lines[2]));
  const extensions = lines.slice(3);
  extensions.forEach((e, i) => {
    if (e === "") throw new Error(`checkpoint extension line ${i + 1} is empty`);
    if (CONTROL.test(e)) throw new Error(`checkpoint extension line ${i + 1} is not UTF-8 text without control characters`);
  });
  return { origin: lines[0], size, rootHash, extensions };
}

/** Writes a checkpoint's text. @param {Checkpoint} c */
export function marshalCheckpoint(c) {
  return `${c.origin}\n${c.size}\n${encodeBase64(c.rootHash)}\n` + c.extensions.map((e) => e + "\n").join("");
}

/**
 * @typedef {Checkpoint & { note: import("./note.js").Note, raw: Uint8Array }} SignedCheckpoint
 */

/**
 * Opens a signed checkpoint trusting logKey for its log (and others, such
 * as witnesses' keys, whose signatures are then verified too): the note
 * must carry a valid signature by logKey, every signature in canonical
 * base64, and a body whose origin is logKey's name. The error messages are
 * those of Annal's Go reader (checkpoints.OpenCheckpoint).
 * @param {string | Uint8Array} signed
 * @param {import("./note.js").NoteVerifier} logKey
 * @param {import("./note.js").NoteVerifier[]} [others]
 * @returns {Promise<SignedCheckpoint>}
 */
export async function openCheckpoint(signed, logKey, others = []) {
  const raw = bytesOf(signed);
  if (raw.length > MAX_CHECKPOINT_SIZE) {
    throw new Error(`checkpoint is ${raw.length} bytes, more than the limit of ${MAX_CHECKPOINT_SIZE}`);
  }
  let note;
  try {
    note = await openNote(raw, [logKey, ...others]);
  } catch (e) {
    if (e instanceof UnverifiedNoteError) throw new Error(`checkpoint has no signature by log key ${goQuote(logKey.name)}`);
    if (e instanceof InvalidSignatureError) throw new Error(`checkpoint signature by ${goQuote(e.keyName)} does not verify`);
    if (e instanceof MalformedNoteError) throw new Error(`checkpoint is not a well-formed signed note: ${e.message}`);
    throw e;
  }
  checkCanonicalSignatures(new TextDecoder("utf-8", { ignoreBOM: true }).decode(raw));
  if (!note.sigs.some((s) => s.name === logKey.name && s.keyHash === logKey.keyHash)) {
    throw new Error(`checkpoint has no signature by log key ${goQuote(logKey.name)}`);
  }
  const c = parseCheckpointBody(note.text);
  if (c.origin !== logKey.name) {
    throw new Error(`checkpoint origin ${goQuote(c.origin)} is not the log key's name ${goQuote(logKey.name)}`);
  }
  return { ...c, note, raw };
}

// Every signature of a checkpoint has one spelling: strict base64.
function checkCanonicalSignatures(/** @type {string} */ signed) {
  const i = signed.lastIndexOf("\n\n");
  for (const line of signed.slice(i + 2).replace(/\n$/, "").split("\n")) {
    const j = line.lastIndexOf(" ");
    try {
      decodeBase64(line.slice(j + 1));
    } catch {
      throw new Error(`checkpoint signature line ${goQuote(abbreviate(line))} is not canonical base64`);
    }
  }
}

export { isValidKeyName };
