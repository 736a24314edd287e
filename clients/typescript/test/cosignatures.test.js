// testvectors/cosignatures.json: witness keys, cosigned checkpoints and
// rejects under a policy whose quorum is the witness, as
// testvectors/cosignatures_test.go asserts them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parsePolicy, verifyProofWithPolicy, witnessVerifier } from "@annal/client";
import { deriveKey, vectors } from "./helpers.js";

const f = vectors("cosignatures.json");

async function keysOf() {
  /** @type {Record<string, Awaited<ReturnType<typeof deriveKey>>>} */
  const keys = {};
  for (const k of f.keys) keys[k.label] = await deriveKey(k);
  return keys;
}

function policyFor(/** @type {any} */ log, /** @type {string} */ name, /** @type {string} */ vkey) {
  return parsePolicy(`log ${log.verifierKey}\nwitness ${name} ${vkey}\nquorum ${name}\n`);
}

test("cosignatures.json: witness keys in cosignature/v1 form (type 0x04)", async () => {
  const keys = await keysOf();
  assert.ok(f.witnesses.length >= 2);
  for (const w of f.witnesses) {
    assert.equal(keys[w.label].cosignerKeyId, w.key_id, w.label);
    assert.equal(keys[w.label].cosignerVerifierKey, w.verifier_key, w.label);
    const v = await witnessVerifier(w.verifier_key);
    assert.equal(v.keyHash.toString(16).padStart(8, "0"), w.key_id);
    // A log's plain Ed25519 key is not a witness key.
    await assert.rejects(witnessVerifier(keys[w.label].verifierKey), /plain Ed25519 key/);
  }
});

test("cosignatures.json: every cosigned checkpoint meets a quorum of its witness", async () => {
  const keys = await keysOf();
  const log = keys[f.keys[0].label];
  assert.ok(f.vectors.length >= 2);
  for (const v of f.vectors) {
    const w = f.witnesses.find((/** @type {any} */ x) => x.label === v.witness);
    assert.ok(v.message.startsWith(`cosignature/v1\ntime ${v.time}\n${log.name}\n${v.size}\n${v.root_hash}\n`), v.name);
    assert.ok(v.cosigned_checkpoint.endsWith(v.signature_line), v.name);
    const res = await (await policyFor(log, v.witness, w.verifier_key)).openCheckpoint(v.cosigned_checkpoint);
    assert.deepEqual(res.cosigners, [v.witness], v.name);
    assert.equal(res.checkpoint.size, BigInt(v.size));
    // The other witness's policy is not met by this cosignature.
    const other = f.witnesses.find((/** @type {any} */ x) => x.label !== v.witness);
    await assert.rejects((await policyFor(log, other.label, other.verifier_key)).openCheckpoint(v.cosigned_checkpoint), {
      check: "policy",
    });
    // A quorum of none needs only the log's signature.
    const none = await parsePolicy(`log ${log.verifierKey}\nquorum none\n`);
    assert.deepEqual((await none.openCheckpoint(v.cosigned_checkpoint)).cosigners, []);
  }
});

test("cosignatures.json: every reject is refused with the Go verifier's reason", async () => {
  const keys = await keysOf();
  const log = keys[f.keys[0].label];
  assert.ok(f.rejects.length >= 3);
  for (const r of f.rejects) {
    const v = f.vectors.find((/** @type {any} */ x) => x.name === r.from);
    const w = f.witnesses.find((/** @type {any} */ x) => x.label === v.witness);
    const policy = await policyFor(log, v.witness, w.verifier_key);
    await assert.rejects(policy.openCheckpoint(r.cosigned_checkpoint), { message: r.go_error }, r.name);
  }
});

test("cosignatures.json: a group quorum counts each witness's valid cosignature", async () => {
  const keys = await keysOf();
  const log = keys[f.keys[0].label];
  const [a, b] = f.vectors;
  assert.equal(a.cosigned_checkpoint.split("\n\n")[0], b.cosigned_checkpoint.split("\n\n")[0], "same checkpoint body");
  const both = a.cosigned_checkpoint + b.signature_line;
  const [wa, wb] = [a.witness, b.witness].map((l) => f.witnesses.find((/** @type {any} */ x) => x.label === l));
  const policy = (/** @type {string} */ k) =>
    parsePolicy(
      `# two witnesses\nlog ${log.verifierKey}\nwitness ${wa.label} ${wa.verifier_key}\nwitness ${wb.label} ${wb.verifier_key}\n` +
        `group g ${k} ${wa.label} ${wb.label}\nquorum g\n`,
    );
  assert.deepEqual((await (await policy("all")).openCheckpoint(both)).cosigners, [wa.label, wb.label].sort());
  assert.deepEqual((await (await policy("1")).openCheckpoint(a.cosigned_checkpoint)).cosigners, [wa.label]);
  await assert.rejects((await policy("all")).openCheckpoint(a.cosigned_checkpoint), {
    message: `policy: the checkpoint's cosignatures (${wa.label}) do not meet the quorum "g"`,
  });
  await assert.rejects(policy("3"), { check: "policy", message: /threshold "3" is not a number from 1 to 2/ });
});

test("cosignatures.json: a tlog-proof whose checkpoint carries the cosignature verifies under the policy", async () => {
  const keys = await keysOf();
  const log = keys[f.keys[0].label];
  const v = f.vectors[0];
  const w = f.witnesses.find((/** @type {any} */ x) => x.label === v.witness);
  // A one-entry tree: its root is the leaf hash, so a made-up entry whose
  // leaf hash is not the vector's root must be refused, after the quorum.
  const proof = `c2sp.org/tlog-proof@v1\nindex 0\n\n${v.cosigned_checkpoint}`;
  const policy = await policyFor(log, v.witness, w.verifier_key);
  await assert.rejects(verifyProofWithPolicy('{"v":1}', proof, policy), { check: "inclusion" });
  const noWitness = proof.replace(v.signature_line, "");
  await assert.rejects(verifyProofWithPolicy('{"v":1}', noWitness, policy), { check: "policy" });
});
