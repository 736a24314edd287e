// testvectors/tlogproofs.json: the tree, every inclusion and consistency
// proof and every reject, as testvectors/tlogproofs_test.go asserts them.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  leafHash,
  marshalTLogProof,
  nodeHash,
  parseHashes,
  parseTLogProof,
  verifyConsistencyProof,
  verifyProof,
} from "@annal/client";
import { deriveKey, encodeBase64, signNote, toHex, utf8, vectors } from "./helpers.js";

const f = vectors("tlogproofs.json");

/** RFC 6962 §2.1 Merkle Tree Hash, by hand. @param {Uint8Array[]} leaves @returns {Promise<Uint8Array>} */
async function mth(leaves) {
  if (leaves.length === 0) return new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array()));
  if (leaves.length === 1) return leaves[0];
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(await mth(leaves.slice(0, k)), await mth(leaves.slice(k)));
}

async function tree() {
  const leaves = [];
  for (const e of f.entries) leaves.push(await leafHash(utf8.encode(e)));
  return leaves;
}

test("tlogproofs.json: leaf hashes, root and checkpoint of the tree", async () => {
  const leaves = await tree();
  assert.equal(leaves.length, 7);
  assert.deepEqual(leaves.map(toHex), f.leaf_hashes);
  assert.equal(encodeBase64(await mth(leaves)), f.root_hash);
  const log = await deriveKey(f.keys.find((/** @type {any} */ k) => k.label === "log"));
  const body = `${log.name}\n${leaves.length}\n${f.root_hash}\n`;
  assert.equal(await signNote(body, [log]), f.checkpoint);
});

test("tlogproofs.json: every inclusion proof verifies offline and reads back as written", async () => {
  const leaves = await tree();
  const log = await deriveKey(f.keys.find((/** @type {any} */ k) => k.label === "log"));
  assert.ok(f.inclusion.length >= 4);
  for (const v of f.inclusion) {
    const res = await verifyProof(f.entries[v.index], v.proof, log.verifierKey);
    assert.equal(res.index, BigInt(v.index));
    assert.equal(res.size, 7n);
    assert.equal(encodeBase64(res.rootHash), f.root_hash);
    assert.equal(toHex(res.leafHash), f.leaf_hashes[v.index]);
    const p = parseTLogProof(v.proof);
    assert.equal(p.extra === undefined ? undefined : new TextDecoder().decode(p.extra), v.extra);
    assert.equal(marshalTLogProof(p), v.proof);
    // The same proof does not hold for any other entry of the tree.
    const other = (v.index + 1) % leaves.length;
    await assert.rejects(verifyProof(f.entries[other], v.proof, log.verifierKey), { check: "inclusion" });
  }
});

test("tlogproofs.json: every consistency proof verifies, and a changed one does not", async () => {
  const log = await deriveKey(f.keys.find((/** @type {any} */ k) => k.label === "log"));
  assert.ok(f.consistency.length >= 7);
  for (const v of f.consistency) {
    const res = await verifyConsistencyProof(v.checkpoint1, v.checkpoint2, v.proof, log.verifierKey);
    assert.equal(res.old.size, BigInt(v.size1));
    assert.equal(res.new.size, BigInt(v.size2));
    const hashes = parseHashes(v.proof);
    if (hashes.length === 0) continue;
    const dropped = hashes.slice(1).map((h) => encodeBase64(h) + "\n").join("");
    await assert.rejects(verifyConsistencyProof(v.checkpoint1, v.checkpoint2, dropped, log.verifierKey), { check: "consistency" });
    const flipped = hashes.map((h, i) => (i === 0 ? Uint8Array.from(h, (b, j) => (j === 0 ? b ^ 1 : b)) : h));
    const text = flipped.map((h) => encodeBase64(h) + "\n").join("");
    await assert.rejects(verifyConsistencyProof(v.checkpoint1, v.checkpoint2, text, log.verifierKey), { check: "consistency" });
    // Swapped checkpoints: the newer tree is never a prefix of the older.
    if (v.size1 !== v.size2) {
      await assert.rejects(verifyConsistencyProof(v.checkpoint2, v.checkpoint1, v.proof, log.verifierKey), { check: "consistency" });
    }
  }
});

test("tlogproofs.json: every reject is refused with the Go verifier's reason", async () => {
  const log = await deriveKey(f.keys.find((/** @type {any} */ k) => k.label === "log"));
  assert.ok(f.rejects.length >= 13);
  for (const r of f.rejects) {
    const entry = f.entries[r.entry_index ?? r.from_index];
    await assert.rejects(verifyProof(entry, r.proof, log.verifierKey), (/** @type {any} */ e) => {
      assert.equal(e.message, r.go_error, r.name);
      assert.equal(e.check, r.go_error.split(":")[0], r.name);
      return true;
    });
  }
});
