// testvectors/checkpoints.json: every key, vector and reject, as
// testvectors/checkpoints_test.go asserts them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { marshalCheckpoint, newVerifier, openCheckpoint } from "@annal/client";
import { deriveKey, fromHex, signNote, toHex, vectors } from "./helpers.js";

const f = vectors("checkpoints.json");

async function keysOf() {
  /** @type {Record<string, Awaited<ReturnType<typeof deriveKey>>>} */
  const keys = {};
  for (const k of f.keys) keys[k.label] = await deriveKey(k);
  return keys;
}

test("checkpoints.json: keys derive from their seeds as c2sp.org/signed-note says", async () => {
  const keys = await keysOf();
  assert.ok(f.keys.length > 0);
  for (const k of f.keys) {
    const d = keys[k.label];
    assert.equal(d.publicKeyHex, k.public_key_hex, k.label);
    assert.equal(d.keyId, k.key_id, k.label);
    assert.equal(d.privateKey, k.private_key, k.label);
    assert.equal(d.verifierKey, k.verifier_key, k.label);
    const v = await newVerifier(k.verifier_key);
    assert.equal(v.name, k.name);
    assert.equal(v.keyHash.toString(16).padStart(8, "0"), k.key_id);
  }
});

test("checkpoints.json: every vector's body and signed note, and the reader accepts it", async () => {
  const keys = await keysOf();
  assert.ok(f.vectors.length >= 5);
  for (const v of f.vectors) {
    const body = marshalCheckpoint({
      origin: v.origin,
      size: BigInt(v.size),
      rootHash: fromHex(v.root_hash_hex),
      extensions: v.extensions ?? [],
    });
    assert.equal(body, v.body, v.name);
    const signers = v.signers.map((/** @type {string} */ l) => keys[l]);
    assert.equal(await signNote(body, signers), v.signed_note, v.name);
    const logKey = await newVerifier(signers[0].verifierKey);
    const c = await openCheckpoint(v.signed_note, logKey);
    assert.equal(c.origin, v.origin, v.name);
    assert.equal(c.size, BigInt(v.size), v.name);
    assert.equal(toHex(c.rootHash), v.root_hash_hex, v.name);
    assert.deepEqual(c.extensions, v.extensions ?? [], v.name);
  }
});

test("checkpoints.json: every reject is refused with the Go reader's reason", async () => {
  const keys = await keysOf();
  assert.ok(f.rejects.length >= 14);
  for (const r of f.rejects) {
    let signed = await signNote(r.text, r.signers.map((/** @type {string} */ l) => keys[l]));
    if (r.old) {
      assert.ok(signed.includes(r.old), r.name);
      signed = signed.replace(r.old, r.new);
    }
    assert.equal(signed, r.signed_note, r.name);
    const verifier = await newVerifier(keys[r.verifier].verifierKey);
    await assert.rejects(openCheckpoint(r.signed_note, verifier), { message: r.go_error }, r.name);
  }
});
