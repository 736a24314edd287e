// Signed requests (testvectors/FORMATS.md, "Signed requests"): an agent's
// Ed25519 key, in x/mod note form ("PRIVATE+KEY+<name>+<id>+<base64>", as
// `annal keys generate` writes it), signs "annal/signed-request/v1\n" and
// the RFC 8785 JSON of {by, nonce, origin, request: {method, path, body},
// time}; the log checks it against the actor's registered key, and an
// auditor again offline. The same bytes as the Go client.

import { canonicalJSON } from "./canonical.js";
import { concat, decodeBase64, encodeBase64, fromHex, toHex, utf8 } from "./encoding.js";
import { isValidKeyName, keyHash, sha256 } from "./note.js";

export const SIGNED_STATEMENT_CONTEXT = "annal/signed-request/v1\n";
export const SEAL_CONTEXT = "annal/sealed-payload/v1\n";
export const SIGNATURE_HEADER = "Annal-Signature";
const PKCS8_ED25519 = fromHex("302e020100300506032b657004220420");

/**
 * A sealed payload's commitment (FORMATS.md, "Sealed payloads"):
 * "sha256:" || hex(SHA-256("annal/sealed-payload/v1\n" || salt || JCS(payload))).
 * @param {Uint8Array} salt 32 bytes
 * @param {unknown} payload
 */
export async function sealCommitment(salt, payload) {
  if (salt.length !== 32) throw new Error(`salt is ${salt.length} bytes, want 32`);
  return "sha256:" + toHex(await sha256(concat(utf8.encode(SEAL_CONTEXT), salt, utf8.encode(canonicalJSON(payload)))));
}

/**
 * An action body as a signature covers it: a body that seals its payload
 * with its own salt has payload, salt, seal and subject replaced by
 * "sealed": {"commitment", "subject"}, the commitment being "sha256:" ||
 * hex(SHA-256(SEAL_CONTEXT || salt || JCS(payload))).
 * @param {unknown} body
 */
export async function sealedBody(body) {
  if (!body || typeof body !== "object" || Array.isArray(body)) return body;
  const m = /** @type {Record<string, unknown>} */ ({ ...body });
  if (!("salt" in m) && !("seal" in m) && !("subject" in m)) return body;
  let salt;
  try {
    salt = typeof m.salt === "string" ? decodeBase64(m.salt) : undefined;
  } catch {
    salt = undefined;
  }
  if (!salt || salt.length !== 32 || typeof m.subject !== "string" || m.payload === undefined || m.payload === null) {
    throw new Error("annal: a signed request that seals its payload carries the payload, its subject and its salt");
  }
  const commitment = await sealCommitment(salt, m.payload);
  const subject = m.subject;
  for (const k of ["payload", "salt", "seal", "subject"]) delete m[k];
  m.sealed = { commitment, subject };
  return m;
}

/**
 * The bytes a request signature covers.
 * @param {{origin: string, by: string, nonce: string, time: string, method: string, path: string, body?: string}} r
 *   body is the request's JSON text as sent (absent or empty: no body)
 */
export async function signedStatement(r) {
  /** @type {{method: string, path: string, body?: unknown}} */
  const request = { method: r.method, path: r.path };
  if (r.body !== undefined && r.body.trim() !== "") {
    request.body = JSON.parse(r.body);
    if (r.method === "POST" && r.path === "/v1/actions") request.body = await sealedBody(request.body);
  }
  const statement = { by: r.by, nonce: r.nonce, origin: r.origin, request, time: r.time };
  return utf8.encode(SIGNED_STATEMENT_CONTEXT + canonicalJSON(statement));
}

/** An Ed25519 request-signing key. */
export class SigningKey {
  /** @param {string} name @param {number} keyHash @param {CryptoKey} priv @param {string} verifierKey */
  constructor(name, keyHash, priv, verifierKey) {
    this.name = name;
    this.keyHash = keyHash;
    this.priv = priv;
    /** "<name>+<id>+<base64 0x01||public key>": what the actor registers. */
    this.verifierKey = verifierKey;
  }

  /** The key id, 8 hex digits. */
  get keyId() {
    return this.keyHash.toString(16).padStart(8, "0");
  }

  /** Signs bytes; returns the signature in base64. @param {Uint8Array} msg */
  async sign(msg) {
    return encodeBase64(new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, this.priv, /** @type {BufferSource} */ (msg))));
  }

  /**
   * The Annal-Signature header of a request.
   * @param {{origin: string, by: string, method: string, path: string, body?: string, nonce?: string, time?: string}} r
   */
  async header(r) {
    const nonce = r.nonce ?? encodeBase64(crypto.getRandomValues(new Uint8Array(16))).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
    const time = r.time ?? new Date().toISOString().replace(/\.?0*Z$/, "Z");
    const sig = await this.sign(await signedStatement({ ...r, nonce, time }));
    return `key=${this.keyId}, nonce=${nonce}, time=${time}, sig=${sig}`;
  }
}

/** @param {string} name @param {Uint8Array} seed */
async function fromSeed(name, seed) {
  const priv = await crypto.subtle.importKey("pkcs8", concat(PKCS8_ED25519, seed), { name: "Ed25519" }, true, ["sign"]);
  const jwk = await crypto.subtle.exportKey("jwk", priv);
  const pub = decodeBase64(/** @type {string} */ (jwk.x).replace(/-/g, "+").replace(/_/g, "/") + "=");
  const typed = concat(Uint8Array.of(1), pub);
  const id = await keyHash(name, typed);
  const vkey = `${name}+${id.toString(16).padStart(8, "0")}+${encodeBase64(typed)}`;
  return { key: new SigningKey(name, id, priv, vkey), skey: `PRIVATE+KEY+${name}+${id.toString(16).padStart(8, "0")}+${encodeBase64(concat(Uint8Array.of(1), seed))}` };
}

/**
 * Loads a signing key "PRIVATE+KEY+<name>+<id>+<base64 0x01||seed>" (x/mod note form).
 * @param {string} skey
 */
export async function loadSigningKey(skey) {
  const parts = skey.trim().split("+");
  const [p, k, name, id] = parts;
  const key64 = parts.slice(4).join("+");
  /** @type {Uint8Array} */
  let raw = new Uint8Array();
  try {
    raw = decodeBase64(key64);
  } catch {
    /* refused below */
  }
  if (p !== "PRIVATE" || k !== "KEY" || !isValidKeyName(name ?? "") || raw.length !== 33 || raw[0] !== 1) {
    throw new Error("signing key is not an x/mod note Ed25519 signer key (PRIVATE+KEY+<name>+<id>+<key>)");
  }
  const { key } = await fromSeed(name, raw.slice(1));
  if (key.keyId !== id) throw new Error(`signing key names key id ${id}, but its name and key give ${key.keyId}`);
  return key;
}

/**
 * Generates a signing key named name (as `annal keys generate`); give
 * verifierKey to annald (the agent's signing_key), keep privateKey secret.
 * @param {string} name
 * @param {Uint8Array} [seed] 32 bytes; random when absent
 */
export async function generateSigningKey(name, seed = crypto.getRandomValues(new Uint8Array(32))) {
  if (!isValidKeyName(name)) throw new Error(`key name ${JSON.stringify(name)} is empty, or has a space or "+"`);
  const { key, skey } = await fromSeed(name, seed);
  return { privateKey: skey, verifierKey: key.verifierKey, key };
}
