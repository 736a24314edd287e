// testvectors/signed.json: every signed request's key, canonical request,
// statement, signature and header, as testvectors/signed_test.go asserts
// them (Ed25519 is deterministic, so every byte is a known answer).
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateSigningKey, loadSigningKey, newVerifier, signedStatement } from "@annal/client";
import { decodeBase64, fromHex, vectors } from "./helpers.js";

const f = vectors("signed.json");

test("signed.json: every vector's key, statement, signature and header", async () => {
  assert.ok(f.vectors.length >= 3);
  for (const v of f.vectors) {
    const { privateKey, verifierKey, key } = await generateSigningKey(v.key_name, fromHex(v.seed_hex));
    assert.equal(verifierKey, v.verifier_key, v.name);
    assert.equal(key.keyId, v.key_id, v.name);
    // The x/mod note form loads back to the same key.
    assert.equal((await loadSigningKey(privateKey)).verifierKey, v.verifier_key, v.name);
    const body = v.body === undefined || v.body === null ? undefined : JSON.stringify(v.body);
    const stmt = await signedStatement({ origin: v.origin, by: v.by, nonce: v.nonce, time: v.time, method: v.method, path: v.path, body });
    assert.equal(new TextDecoder().decode(stmt), v.statement, v.name);
    assert.ok(v.statement.includes(`"request":${v.request}`), v.name);
    assert.equal(await key.sign(stmt), v.sig, v.name);
    const header = await key.header({ origin: v.origin, by: v.by, nonce: v.nonce, time: v.time, method: v.method, path: v.path, body });
    assert.equal(header, v.header, v.name);
    // The signature verifies under the verifier key, and not over another statement.
    const pub = await crypto.subtle.importKey("raw", decodeBase64(v.verifier_key.split("+").slice(2).join("+")).slice(1), { name: "Ed25519" }, false, ["verify"]);
    assert.ok(await crypto.subtle.verify({ name: "Ed25519" }, pub, /** @type {BufferSource} */ (decodeBase64(v.sig)), /** @type {BufferSource} */ (stmt)), v.name);
    assert.equal((await newVerifier(v.verifier_key)).keyHash.toString(16).padStart(8, "0"), v.key_id);
  }
});

test("signed requests: a sealing body without its salt or subject is refused; a key of another id is refused", async () => {
  const stmt = (/** @type {unknown} */ body) =>
    signedStatement({ origin: "o", by: "b", nonce: "n", time: "2026-01-01T00:00:00Z", method: "POST", path: "/v1/actions", body: JSON.stringify(body) });
  await assert.rejects(stmt({ type: "create", target: "t", payload: 1, seal: true }), /carries the payload, its subject and its salt/);
  await assert.rejects(stmt({ type: "create", target: "t", payload: 1, subject: "s", salt: "AAAA" }), /its salt/);
  const { privateKey } = await generateSigningKey("k", new Uint8Array(32));
  const parts = privateKey.split("+");
  parts[3] = "00000000";
  await assert.rejects(loadSigningKey(parts.join("+")), /names key id 00000000/);
  await assert.rejects(generateSigningKey("a b"), /space/);
});
