// C2SP signed notes (c2sp.org/signed-note) and their keys, read as
// golang.org/x/mod/sumdb/note reads them, so that a note Annal's Go reader
// refuses is refused here for the same reason. Ed25519 (type 0x01, a log's
// key) and cosignature/v1 (type 0x04, a witness's) are verified with
// WebCrypto, which Node 20+ and current browsers provide; ML-DSA-44
// (type 0x06, a witness's post-quantum key) with @noble/post-quantum.

import { ml_dsa44 } from "@noble/post-quantum/ml-dsa.js";
import { bytesOf, concat, decodeBase64, decodeUTF8, fromHex, goQuote, toHex, utf8 } from "./encoding.js";

export const KEY_ED25519 = 0x01;
export const KEY_COSIGNATURE_V1 = 0x04;
export const KEY_MLDSA44 = 0x06;
const MAX_SIGNATURES = 100;

/** The note is not a well-formed signed note. */
export class MalformedNoteError extends Error {
  constructor() {
    super("malformed note");
    this.name = "MalformedNoteError";
  }
}

/** No signature of the note is by a key the reader knows. */
export class UnverifiedNoteError extends Error {
  constructor() {
    super("note has no verifiable signatures");
    this.name = "UnverifiedNoteError";
  }
}

/** A signature by a known key does not verify. */
export class InvalidSignatureError extends Error {
  /** @param {string} keyName @param {number} keyHash */
  constructor(keyName, keyHash) {
    super(`invalid signature for key ${keyName}+${keyHash.toString(16).padStart(8, "0")}`);
    this.name = "InvalidSignatureError";
    this.keyName = keyName;
    this.keyHash = keyHash;
  }
}

export async function sha256(/** @type {Uint8Array} */ data) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", /** @type {BufferSource} */ (data)));
}

/** The 32-bit key id: the first 4 bytes of SHA-256(name || "\n" || type || key). */
export async function keyHash(/** @type {string} */ name, /** @type {Uint8Array} */ typedKey) {
  const sum = await sha256(concat(utf8.encode(name + "\n"), typedKey));
  return new DataView(sum.buffer).getUint32(0);
}

const SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

/** A key name as x/mod note allows it: non-empty, no space, no "+". */
export function isValidKeyName(/** @type {string} */ name) {
  return name !== "" && !SPACE.test(name) && !name.includes("+");
}

/**
 * @typedef {object} NoteVerifier
 * @property {string} name
 * @property {number} keyHash
 * @property {number} type the key type byte
 * @property {(text: Uint8Array, sig: Uint8Array) => Promise<boolean>} verify
 */

/**
 * Reads a verifier key <name>+<8 hex key id>+<base64 type||key>, Ed25519
 * (0x01) or cosignature/v1 (0x04), checking that the id is the one its
 * name and key give.
 * @param {string} vkey
 * @returns {Promise<NoteVerifier>}
 */
export async function newVerifier(vkey) {
  const first = vkey.indexOf("+");
  const second = vkey.indexOf("+", first + 1);
  const parts = first < 0 || second < 0 ? [] : [vkey.slice(0, first), vkey.slice(first + 1, second), vkey.slice(second + 1)];
  if (parts.length !== 3 || !isValidKeyName(parts[0]) || !/^[0-9a-f]{8}$/.test(parts[1])) {
    throw new Error(`malformed verifier key ${goQuote(vkey)}`);
  }
  const [name, idHex, key64] = parts;
  let typed;
  try {
    typed = decodeBase64(key64);
  } catch {
    throw new Error(`malformed verifier key ${goQuote(vkey)}`);
  }
  const type = typed[0];
  const size = type === KEY_MLDSA44 ? 1 + MLDSA44_PUBLIC_KEY_SIZE : 33;
  if ((type !== KEY_ED25519 && type !== KEY_COSIGNATURE_V1 && type !== KEY_MLDSA44) || typed.length !== size) {
    throw new Error(`verifier key ${goQuote(vkey)}: unknown or malformed key type`);
  }
  const id = await keyHash(name, typed);
  if (id !== Number.parseInt(idHex, 16)) throw new Error(`verifier key ${goQuote(vkey)}: invalid verifier hash`);
  if (type === KEY_MLDSA44) return { name, keyHash: id, type, verify: mldsa44CosignatureVerifier(name, typed.slice(1)) };
  const key = await crypto.subtle.importKey("raw", typed.slice(1), { name: "Ed25519" }, false, ["verify"]);
  const ed25519 = (/** @type {Uint8Array} */ msg, /** @type {Uint8Array} */ sig) =>
    sig.length === 64 ? crypto.subtle.verify({ name: "Ed25519" }, key, /** @type {BufferSource} */ (sig), /** @type {BufferSource} */ (msg)) : Promise.resolve(false);
  /** @type {NoteVerifier} */
  const v = { name, keyHash: id, type, verify: ed25519 };
  if (type === KEY_COSIGNATURE_V1) {
    // c2sp.org/tlog-cosignature: 8 bytes of time, big-endian, then Ed25519
    // over "cosignature/v1\ntime <t>\n" and the checkpoint text.
    v.verify = async (text, sig) => {
      if (sig.length !== 8 + 64) return false;
      const time = new DataView(sig.buffer, sig.byteOffset, 8).getBigUint64(0);
      return ed25519(concat(utf8.encode(`cosignature/v1\ntime ${time}\n`), text), sig.slice(8));
    };
  }
  return v;
}

const MLDSA44_PUBLIC_KEY_SIZE = 1312;
const MLDSA44_SIGNATURE_SIZE = 2420;

/**
 * An ML-DSA-44 cosignature/v1 verifier (c2sp.org/tlog-cosignature, as
 * transparency-dev/formats verifies it): the signature is 8 bytes of time
 * then ML-DSA-44 over the subtree/v1 message for the range [0, size) of the
 * checkpoint, which names the cosigner, the time, the origin, the range and
 * the root hash (not the checkpoint's extension lines).
 * @param {string} name @param {Uint8Array} publicKey
 */
function mldsa44CosignatureVerifier(name, publicKey) {
  return async (/** @type {Uint8Array} */ text, /** @type {Uint8Array} */ sig) => {
    if (sig.length !== 8 + MLDSA44_SIGNATURE_SIZE) return false;
    const lines = new TextDecoder("utf-8", { ignoreBOM: true }).decode(text).split("\n");
    if (lines.length < 4 || !/^(0|[1-9][0-9]*)$/.test(lines[1])) return false;
    const [origin, size, rootB64] = lines;
    let root;
    try {
      root = decodeBase64(rootB64);
    } catch {
      return false;
    }
    const nameBytes = utf8.encode(name);
    const originBytes = utf8.encode(origin);
    if (root.length !== 32 || nameBytes.length > 255 || originBytes.length > 255 || originBytes.length === 0 || BigInt(size) >= 1n << 64n) {
      return false;
    }
    const u64 = (/** @type {bigint} */ n) => {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setBigUint64(0, n);
      return b;
    };
    const message = concat(
      utf8.encode("subtree/v1\n\0"),
      Uint8Array.of(nameBytes.length),
      nameBytes,
      sig.slice(0, 8),
      Uint8Array.of(originBytes.length),
      originBytes,
      u64(0n),
      u64(BigInt(size)),
      root,
    );
    try {
      return ml_dsa44.verify(sig.slice(8), message, publicKey);
    } catch {
      return false;
    }
  };
}

/**
 * @typedef {object} NoteSignature
 * @property {string} name
 * @property {number} keyHash
 * @property {string} base64
 */

/**
 * @typedef {object} Note
 * @property {string} text the signed text, ending in a newline
 * @property {NoteSignature[]} sigs signatures by known keys, all verified
 * @property {NoteSignature[]} unverifiedSigs signatures by unknown keys
 */

/**
 * Opens a signed note: checks its form and every signature by a key in
 * known. Like x/mod note.Open, it refuses a note with a control character
 * other than newline, without the blank line before its signatures, with a
 * malformed signature line or a repeated known signature, with an invalid
 * signature by a known key, or with none by a known key.
 * @param {string | Uint8Array} msg
 * @param {NoteVerifier[]} known
 * @returns {Promise<Note>}
 */
export async function openNote(msg, known) {
  const text = decodeUTF8(bytesOf(msg));
  if (text === undefined || /[\u0000-\u0009\u000b-\u001f]/.test(text)) throw new MalformedNoteError();
  const split = text.lastIndexOf("\n\n");
  if (split < 0) throw new MalformedNoteError();
  const body = text.slice(0, split + 1);
  let sigs = text.slice(split + 2);
  if (sigs === "" || !sigs.endsWith("\n")) throw new MalformedNoteError();
  const bodyBytes = utf8.encode(body);
  /** @type {Note} */
  const note = { text: body, sigs: [], unverifiedSigs: [] };
  const seen = new Set();
  const seenUnverified = new Set();
  let count = 0;
  while (sigs.length > 0) {
    const nl = sigs.indexOf("\n");
    let line = sigs.slice(0, nl);
    sigs = sigs.slice(nl + 1);
    if (!line.startsWith("\u2014 ")) throw new MalformedNoteError();
    line = line.slice(2);
    const sp = line.indexOf(" ");
    const name = sp < 0 ? line : line.slice(0, sp);
    const b64 = sp < 0 ? "" : line.slice(sp + 1);
    let sig;
    try {
      sig = decodeBase64(b64, false);
    } catch {
      throw new MalformedNoteError();
    }
    if (!isValidKeyName(name) || b64 === "" || sig.length < 5) throw new MalformedNoteError();
    if (++count > MAX_SIGNATURES) throw new MalformedNoteError();
    const hash = new DataView(sig.buffer, sig.byteOffset, 4).getUint32(0);
    const matches = known.filter((v) => v.name === name && v.keyHash === hash);
    if (matches.length === 0) {
      if (!seenUnverified.has(line)) {
        seenUnverified.add(line);
        note.unverifiedSigs.push({ name, keyHash: hash, base64: b64 });
      }
      continue;
    }
    if (matches.length > 1) throw new Error(`ambiguous key ${name}+${hash.toString(16).padStart(8, "0")}`);
    const id = `${name}+${hash}`;
    if (seen.has(id)) throw new MalformedNoteError();
    seen.add(id);
    if (!(await matches[0].verify(bodyBytes, sig.slice(4)))) throw new InvalidSignatureError(name, hash);
    note.sigs.push({ name, keyHash: hash, base64: b64 });
  }
  if (note.sigs.length === 0) throw new UnverifiedNoteError();
  return note;
}

export { fromHex, toHex };
