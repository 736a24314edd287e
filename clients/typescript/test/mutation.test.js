// The parsers of outside input (tlog-proofs, signed checkpoints, policies)
// under random mutation of the known-answer vectors, the seed corpus: a
// changed proof or checkpoint is never accepted unless it reads as the same
// proof (but for its unsigned extra data), and every refusal is a VerificationError naming its check, never a
// crash of another kind.
import { test } from "node:test";
import assert from "node:assert/strict";
import { VerificationError, parsePolicy, parseTLogProof, verifyProof } from "@annal/client";
import { deriveKey, vectors } from "./helpers.js";
import { mutate, rng } from "./mutate.js";

const tlog = vectors("tlogproofs.json");
const cosig = vectors("cosignatures.json");

test("mutation: a changed tlog-proof is refused with a VerificationError unless it is the same proof but for its extra data", async () => {
  const log = await deriveKey(tlog.keys.find((/** @type {any} */ k) => k.label === "log"));
  const r = rng(1);
  let refused = 0;
  for (let i = 0; i < 1500; i++) {
    const v = tlog.inclusion[i % tlog.inclusion.length];
    const bad = mutate(v.proof, r);
    try {
      await verifyProof(tlog.entries[v.index], bad, log.verifierKey);
      // Accepted: only the same index, hashes and checkpoint may pass
      // (FORMATS.md gives each value one spelling); the extra data is not
      // signed, so it may differ.
      const [got, want] = [parseTLogProof(bad), parseTLogProof(v.proof)];
      assert.deepEqual({ ...got, extra: undefined }, { ...want, extra: undefined }, `accepted a changed proof:\n${JSON.stringify(bad)}`);
    } catch (e) {
      assert.ok(e instanceof VerificationError, `not a VerificationError: ${e}`);
      refused++;
    }
  }
  assert.ok(refused > 1400);
});

test("mutation: a changed cosigned checkpoint never meets the policy with another body", async () => {
  const keys = await Promise.all(cosig.keys.map(deriveKey));
  const w = cosig.witnesses[0];
  const policy = await parsePolicy(`log ${keys[0].verifierKey}\nwitness ${w.label} ${w.verifier_key}\nquorum ${w.label}\n`);
  const v = cosig.vectors[0];
  const body = v.cosigned_checkpoint.split("\n\n")[0];
  const r = rng(2);
  for (let i = 0; i < 1500; i++) {
    const bad = mutate(v.cosigned_checkpoint, r);
    try {
      const res = await policy.openCheckpoint(bad);
      assert.equal(bad.split("\n\n")[0], body, "accepted another checkpoint body");
      assert.deepEqual(res.cosigners, [w.label]);
    } catch (e) {
      assert.ok(e instanceof VerificationError, `not a VerificationError: ${e}`);
    }
  }
});

test("mutation: a changed policy parses or is refused with a VerificationError", async () => {
  const keys = await Promise.all(cosig.keys.map(deriveKey));
  const [w1, w2] = cosig.witnesses;
  const text =
    `# a policy\nlog ${keys[0].verifierKey} http://127.0.0.1:7420/\nwitness w1 ${w1.verifier_key}\n` +
    `witness w2 ${w2.verifier_key} http://127.0.0.1:7430\ngroup g 1 w1 w2\nquorum g\n`;
  await parsePolicy(text);
  const r = rng(3);
  for (let i = 0; i < 1500; i++) {
    try {
      await parsePolicy(mutate(text, r));
    } catch (e) {
      assert.ok(e instanceof VerificationError, `not a VerificationError: ${e}`);
    }
  }
});
