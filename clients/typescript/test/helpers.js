// Test helpers: the repository's known-answer vectors, note signing by
// hand (c2sp.org/signed-note) with WebCrypto only, and a local server's
// lifetime.
import { readFileSync } from "node:fs";
import { after, before } from "node:test";
import { concat, decodeBase64, encodeBase64, fromHex, toHex, utf8 } from "../src/encoding.js";
import { keyHash } from "../src/note.js";

const dir = new URL("../../../testvectors/", import.meta.url);

/** @param {string} name */
export function vectors(name) {
  // Sizes and indexes past 2^53 (up to 2^64-1) are read as strings, for BigInt.
  return JSON.parse(readFileSync(new URL(name, dir), "utf8").replace(/(?<!\\)("(?:size|size1|size2|index|time)": )(\d{16,})/g, '$1"$2"'));
}

// PKCS #8 wrapping of an Ed25519 seed (RFC 8410).
const PKCS8_PREFIX = fromHex("302e020100300506032b657004220420");

/**
 * Derives a note key from a vector's seed: the signing key, the public key
 * and the ids and key strings c2sp.org/signed-note gives.
 * @param {{name: string, seed_hex: string}} k
 */
export async function deriveKey(k) {
  const seed = fromHex(k.seed_hex);
  const priv = await crypto.subtle.importKey("pkcs8", concat(PKCS8_PREFIX, seed), { name: "Ed25519" }, true, ["sign"]);
  const jwk = await crypto.subtle.exportKey("jwk", priv);
  const pub = Buffer.from(/** @type {string} */ (jwk.x), "base64url");
  const id = await keyHash(k.name, concat(Uint8Array.of(1), pub));
  const cosigId = await keyHash(k.name, concat(Uint8Array.of(4), pub));
  const hex8 = (/** @type {number} */ n) => n.toString(16).padStart(8, "0");
  return {
    name: k.name,
    priv,
    publicKeyHex: toHex(pub),
    keyId: hex8(id),
    id,
    privateKey: `PRIVATE+KEY+${k.name}+${hex8(id)}+${encodeBase64(concat(Uint8Array.of(1), seed))}`,
    verifierKey: `${k.name}+${hex8(id)}+${encodeBase64(concat(Uint8Array.of(1), pub))}`,
    cosignerKeyId: hex8(cosigId),
    cosignerVerifierKey: `${k.name}+${hex8(cosigId)}+${encodeBase64(concat(Uint8Array.of(4), pub))}`,
  };
}

/** Signs text as a signed note by each key in turn, by hand. */
export async function signNote(/** @type {string} */ text, /** @type {Awaited<ReturnType<typeof deriveKey>>[]} */ keys) {
  let out = text + "\n";
  for (const k of keys) {
    const sig = new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, k.priv, utf8.encode(text)));
    const idBytes = new Uint8Array(4);
    new DataView(idBytes.buffer).setUint32(0, k.id);
    out += `\u2014 ${k.name} ${encodeBase64(concat(idBytes, sig))}\n`;
  }
  return out;
}

export { concat, decodeBase64, encodeBase64, fromHex, toHex, utf8 };

/**
 * Listens with server on 127.0.0.1 before the file's tests and closes it,
 * and every connection it holds, after them. The returned object's url is
 * the server's once it listens.
 * @param {import("node:http").Server} server
 */
export function serveLocally(server) {
  const at = { url: "" };
  before(async () => {
    await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
    at.url = `http://127.0.0.1:${/** @type {import("node:net").AddressInfo} */ (server.address()).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  return at;
}
