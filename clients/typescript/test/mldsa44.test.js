// ML-DSA-44 witness cosignatures (key type 0x06) under a witness policy,
// against test/fixtures/mldsa44.json: a cosignature made by
// transparency-dev/formats, the library Annal's Go verifier uses
// (testvectors/ has no ML-DSA-44 vector; ML-DSA-44 signing is randomised).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { logVerifier, parsePolicy, verifyProofWithPolicy, witnessVerifier } from "@annal/client";
import { decodeBase64, encodeBase64, vectors } from "./helpers.js";

const f = JSON.parse(readFileSync(new URL("fixtures/mldsa44.json", import.meta.url), "utf8"));
const tlog = vectors("tlogproofs.json");
const policyText = `log ${f.log_verifier_key}\nwitness pq ${f.witness_verifier_key}\nquorum pq\n`;

/** The cosigned checkpoint with its last signature line's bytes changed by change. */
function changeCosignature(/** @type {(sig: Uint8Array) => void} */ change) {
  const lines = f.cosigned_checkpoint.trimEnd().split("\n");
  const last = lines[lines.length - 1];
  const i = last.lastIndexOf(" ");
  const sig = decodeBase64(last.slice(i + 1));
  change(sig);
  lines[lines.length - 1] = last.slice(0, i + 1) + encodeBase64(sig);
  return lines.join("\n") + "\n";
}

test("ML-DSA-44: the key reads as a witness key (type 0x06), never as a log's", async () => {
  const v = await witnessVerifier(f.witness_verifier_key);
  assert.equal(v.type, 6);
  assert.equal(v.keyHash.toString(16).padStart(8, "0"), f.witness_verifier_key.split("+")[1]);
  await assert.rejects(logVerifier(f.witness_verifier_key), { check: "verifier key", message: /unknown verifier algorithm/ });
});

test("ML-DSA-44: the formats library's cosignature meets the quorum, and a proof under it verifies", async () => {
  const policy = await parsePolicy(policyText);
  const res = await policy.openCheckpoint(f.cosigned_checkpoint);
  assert.deepEqual(res.cosigners, ["pq"]);
  assert.equal(res.checkpoint.size, 7n);
  // tlogproofs.json's proof of entry 3, its checkpoint cosigned.
  const v = tlog.inclusion[1];
  const proof = v.proof.slice(0, v.proof.indexOf("\n\n") + 2) + f.cosigned_checkpoint;
  const { proof: pr } = await verifyProofWithPolicy(tlog.entries[v.index], proof, policy);
  assert.equal(pr.index, BigInt(v.index));
});

test("ML-DSA-44: a changed time, signature or checkpoint is refused", async () => {
  const policy = await parsePolicy(policyText);
  const witness = f.witness_verifier_key.split("+")[0];
  const doesNotVerify = `checkpoint signature: checkpoint signature by "${witness}" does not verify`;
  await assert.rejects(policy.openCheckpoint(changeCosignature((s) => (s[4 + 7] ^= 1))), { message: doesNotVerify }, "time");
  await assert.rejects(policy.openCheckpoint(changeCosignature((s) => (s[4 + 8 + 100] ^= 1))), { message: doesNotVerify }, "signature");
  // The log's own signature fails first on a changed size.
  await assert.rejects(policy.openCheckpoint(f.cosigned_checkpoint.replace("\n7\n", "\n6\n")), {
    message: `checkpoint signature: checkpoint signature by "log.annal.example/vectors" does not verify`,
  });
  // Without it the quorum is not met.
  const logOnly = f.cosigned_checkpoint.split("\n").filter((/** @type {string} */ l) => !l.startsWith(`\u2014 ${witness} `)).join("\n");
  await assert.rejects(policy.openCheckpoint(logOnly), { message: `policy: the checkpoint's cosignatures () do not meet the quorum "pq"` });
});
