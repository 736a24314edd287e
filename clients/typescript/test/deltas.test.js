// testvectors/deltas.json and evidence.json: the delta chain (each link's
// canonical bytes and hash, the chain of entries) and every reject, refused
// with the Go verifier's message; every equivocation evidence vector,
// valid ones verified and the others refused with the Go verifier's message.
import { test } from "node:test";
import assert from "node:assert/strict";
import { VerificationError, canonicalJSON, deltaHash, verifyDeltaChain, verifyEvidence } from "@annal/client";
import { vectors } from "./helpers.js";

const d = vectors("deltas.json");
const e = vectors("evidence.json");

test("deltas.json: each link's canonical bytes and hash, and the chain of its entries", async () => {
  assert.equal(d.chain.length, 4);
  for (const l of d.chain) {
    const { delta_hash: _, ...members } = l.delta;
    assert.equal(canonicalJSON(members), l.canonical);
    assert.equal(await deltaHash(l.delta), l.delta_hash);
    assert.equal(JSON.parse(l.entry).delta.delta_hash, l.delta_hash);
  }
  const c = await verifyDeltaChain(d.chain.map((/** @type {any} */ l) => l.entry));
  assert.equal(c.deltas, 4);
  assert.equal(c.head, d.chain[3].delta_hash);
  assert.equal(c.session, "sess-42");
  assert.equal(c.complete, true);
  // The chain from its second delta is mid-chain: its links hold, its start cannot be checked.
  const mid = await verifyDeltaChain(d.chain.slice(1).map((/** @type {any} */ l) => l.entry), false);
  assert.equal(mid.complete, false);
});

/** The entry of chain[at] with a reject's change applied, as testvectors/deltas_test.go makes it. */
async function changed(/** @type {any} */ r, /** @type {number} */ at) {
  const ev = JSON.parse(d.chain[at].entry);
  if (r.change !== at) return d.chain[at].entry;
  let delta = { ...ev.delta };
  if (r.parent) delta.parent_hash = r.parent;
  if (r.old) {
    const text = canonicalJSON(delta);
    assert.ok(text.includes(r.old), `reject ${r.name}: ${r.old} is not in the delta`);
    delta = JSON.parse(text.replace(r.old, r.new));
  }
  if (r.reseal || r.parent) delta.delta_hash = await deltaHash(delta);
  return canonicalJSON({ ...ev, delta });
}

test("deltas.json: every reject is refused, with the Go verifier's message", async () => {
  assert.ok(d.rejects.length >= 5);
  for (const r of d.rejects) {
    const entries = [];
    for (const at of r.order) entries.push(await changed(r, at));
    await assert.rejects(verifyDeltaChain(entries), (/** @type {any} */ err) => {
      assert.ok(err instanceof VerificationError, `${r.name}: ${err}`);
      assert.equal(err.message, r.go_error, r.name);
      return true;
    });
  }
});

test("evidence.json: valid evidence verifies, the rest is refused with the Go verifier's message", async () => {
  const logKey = e.keys[0].verifier_key;
  let valid = 0;
  for (const v of e.vectors) {
    if (v.valid) {
      const res = await verifyEvidence(v.evidence, logKey);
      assert.deepEqual(res.sizes, [BigInt(v.small.size), BigInt(v.large.size)], v.name);
      valid++;
    } else {
      await assert.rejects(verifyEvidence(v.evidence, logKey), (/** @type {any} */ err) => {
        assert.ok(err instanceof VerificationError, `${v.name}: ${err}`);
        assert.equal(err.message, v.go_error, v.name);
        return true;
      });
    }
  }
  assert.ok(valid >= 4 && valid < e.vectors.length);
});

test("evidence: another trusted key, a changed root, a misspelt member and a duplicate one are refused", async () => {
  const good = e.vectors.find((/** @type {any} */ v) => v.valid && v.evidence.includes("prefix_root")).evidence;
  const other = "other.example/log+01020304+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4";
  await assert.rejects(verifyEvidence(good, other), { check: "verifier key" });
  const ev = JSON.parse(good);
  const flipped = { ...ev, prefix_root: ev.consistency_proof[0] };
  await assert.rejects(verifyEvidence(JSON.stringify(flipped)), { check: "consistency" });
  const { log_key, ...rest } = ev;
  await assert.rejects(verifyEvidence(JSON.stringify({ ...rest, Log_Key: log_key })), /member "Log_Key", which its format does not declare/);
  await assert.rejects(verifyEvidence(good.replace('"origin":', '"origin":"x","origin":')), /twice/);
  const tampered = { ...ev, checkpoints: [ev.checkpoints[0].replace(/\n\d+\n/, "\n6\n"), ev.checkpoints[1]] };
  await assert.rejects(verifyEvidence(JSON.stringify(tampered)), { check: "checkpoint signature" });
});
