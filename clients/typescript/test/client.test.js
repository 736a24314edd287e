// The HTTP client against a real annald: a receipt, its proof verified
// offline, a denial as a typed error naming stage, gate and the denial's
// index, a hold answered by a human, and an answer of the wrong credential.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { AnnalClient, AnnalError, DEFAULT_RETRY, generateSigningKey, leafHash, toHex, verifyProof } from "@annal/client";
import { startAnnald } from "./annald.js";

/** @type {Awaited<ReturnType<typeof startAnnald>>} */
let annald;
/** @type {AnnalClient} */
let root;
/** @type {AnnalClient} */
let agent;

before(async () => {
  annald = await startAnnald();
  if (!annald) return;
  root = new AnnalClient(annald.url, { credential: annald.rootCredential });
  const a = await root.createAgent({
    name: "scribe",
    purpose: "keeps meeting notes",
    energy: 1000,
    trust: 0.8, // ring 2 (standard), which create and mutate need
    grants: [{ pattern: "workspace/**", actions: ["create", "mutate"] }],
  });
  await root.issueEnvelope({
    holder: a.id,
    budget: 500,
    grants: [{ pattern: "workspace/**", actions: ["create", "mutate"] }],
    hold_on: [{ pattern: "workspace/release/*", actions: ["mutate"] }],
  });
  agent = new AnnalClient(annald.url, { credential: a.credential });
});

after(async () => {
  await annald?.stop();
});

const decode = (/** @type {Uint8Array} */ b) => JSON.parse(new TextDecoder().decode(b));

test("client: a committed action's receipt, and its entry and proof verified offline", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const r = await agent.submit({ type: "create", target: "workspace/notes.md", payload: { text: "hello" } });
  assert.equal(r.status, "committed");
  const { entry, result } = await agent.fetchAndVerify(r.index, annald.verifierKey);
  assert.equal(toHex(result.leafHash), r.leaf_hash);
  assert.equal(toHex(await leafHash(entry)), r.leaf_hash);
  const ev = decode(entry);
  assert.equal(ev.id, r.event_id);
  assert.deepEqual(ev.action.payload, { text: "hello" });
  assert.equal(result.index, BigInt(r.index));
  // The same proof under another log's key is refused.
  const other = "log.annal.example/vectors+0124a124+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4";
  const proof = await agent.proof(r.index);
  await assert.rejects(verifyProof(entry, proof, other), { check: "checkpoint signature" });
});

test("client: wait=published gives a receipt with a tlog-proof that verifies offline", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const r = await agent.submit({ type: "mutate", target: "workspace/notes.md", payload: { text: "again" } }, { waitPublished: true });
  assert.ok(r.proof, r.proof_error);
  const entry = await agent.event(r.index);
  const res = await verifyProof(entry, /** @type {string} */ (r.proof), annald.verifierKey);
  assert.equal(toHex(res.leafHash), r.leaf_hash);
});

test("client: a denial is an AnnalError with stage, gate and the denial's index in the log", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const err = await agent.submit({ type: "create", target: "mail/outbox/1", payload: {} }).then(
    () => assert.fail("the kernel allowed an action outside the agent's grants"),
    (/** @type {any} */ e) => e,
  );
  assert.ok(err instanceof AnnalError, String(err));
  assert.equal(err.status, 403);
  assert.ok(err.stage && err.gate, `stage ${err.stage}, gate ${err.gate}`);
  assert.equal(typeof err.denialIndex, "number");
  assert.match(err.message, new RegExp(`^annal: 403 Forbidden \\(stage ${err.stage}\\): .* \\(the denial is recorded in the log at index ${err.denialIndex}\\)$`));
  assert.equal(err.shouldRetry, false);
  // The denial is in the log, and provably so.
  const { entry } = await agent.fetchAndVerify(/** @type {number} */ (err.denialIndex), annald.verifierKey);
  const ev = decode(entry);
  assert.equal(ev.kind, "action.denied");
  assert.equal(ev.denial.stage, `${err.stage}/${err.gate}`);
  assert.equal(ev.action.target, "mail/outbox/1");
});

test("client: a held action waits for a human, and runs once approved", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const r = await agent.submit({ type: "mutate", target: "workspace/release/v1", payload: { go: true } });
  assert.equal(r.status, "held");
  assert.ok(r.hold_id);
  assert.equal((await agent.hold(/** @type {string} */ (r.hold_id))).status, "pending");
  const approved = await root.answerHold(/** @type {string} */ (r.hold_id), "approve", "looks right");
  assert.equal(approved.status, "committed");
  const h = await agent.waitHold(/** @type {string} */ (r.hold_id));
  assert.equal(h.status, "approved");
  const { entry } = await agent.fetchAndVerify(approved.index, annald.verifierKey);
  assert.equal(decode(entry).hold.id, r.hold_id);
});

test("client: a wrong credential is a 401 AnnalError, not retried", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  let calls = 0;
  const counting = /** @type {typeof fetch} */ ((input, init) => {
    calls++;
    return fetch(input, init);
  });
  const c = new AnnalClient(annald.url, { credential: "not-a-credential", retry: { attempts: 3, firstMs: 1, maxMs: 1 }, fetch: counting });
  await assert.rejects(c.submit({ type: "create", target: "workspace/x", payload: 1 }), (/** @type {any} */ e) => {
    assert.ok(e instanceof AnnalError);
    assert.equal(e.status, 401);
    assert.equal(e.stage, undefined);
    return true;
  });
  assert.equal(calls, 1);
});

test("client: a 429 of the rate limit is retried as the annal CLI does, and refused without a retry policy", async (t) => {
  const limited = await startAnnald(["--rate-limit", "2=1/1"]);
  if (!limited) return t.skip("go is not installed (set ANNALD or install go)");
  try {
    const admin = new AnnalClient(limited.url, { credential: limited.rootCredential });
    const a = await admin.createAgent({
      name: "hasty",
      purpose: "sends faster than its ring allows",
      energy: 1000,
      trust: 0.8,
      grants: [{ pattern: "workspace/**", actions: ["create"] }],
    });
    await admin.issueEnvelope({ holder: a.id, budget: 500, grants: [{ pattern: "workspace/**", actions: ["create"] }] });
    const once = new AnnalClient(limited.url, { credential: a.credential });
    const results = await Promise.allSettled([1, 2, 3].map((i) => once.submit({ type: "create", target: `workspace/a${i}`, payload: i })));
    const refused = results.filter((r) => r.status === "rejected").map((r) => /** @type {PromiseRejectedResult} */ (r).reason);
    assert.ok(refused.length >= 1, "three requests at once within a burst of 1 all passed");
    for (const e of refused) {
      assert.ok(e instanceof AnnalError, String(e));
      assert.equal(e.status, 429);
      assert.equal(e.shouldRetry, true);
    }
    const patient = new AnnalClient(limited.url, { credential: a.credential, retry: DEFAULT_RETRY });
    const receipts = await Promise.all([4, 5, 6].map((i) => patient.submit({ type: "create", target: `workspace/b${i}`, payload: i })));
    assert.deepEqual(receipts.map((r) => r.status), ["committed", "committed", "committed"]);
  } finally {
    await limited.stop();
  }
});

test("client: a signing client's actions carry its signature, and an actor that requires one refuses an unsigned request", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const { verifierKey, key } = await generateSigningKey("signer-key");
  const grants = [{ pattern: "workspace/**", actions: ["create"] }];
  const a = await root.createAgent({
    name: "signer",
    purpose: "signs what it asks",
    energy: 1000,
    trust: 0.8,
    grants,
    signing_key: verifierKey,
    require_signed: true,
  });
  await root.issueEnvelope({ holder: a.id, budget: 500, grants });
  const signed = new AnnalClient(annald.url, { credential: a.credential, signingKey: key });
  const r = await signed.submit({ type: "create", target: "workspace/signed.md", payload: { n: 1 } });
  assert.equal(r.status, "committed");
  const { entry } = await signed.fetchAndVerify(r.index, annald.verifierKey);
  const ev = decode(entry);
  assert.equal(ev.signed.by, a.id);
  assert.equal(ev.signed.key, key.keyId);
  // The same request unsigned is refused.
  const unsigned = new AnnalClient(annald.url, { credential: a.credential });
  await assert.rejects(unsigned.submit({ type: "create", target: "workspace/unsigned.md", payload: { n: 2 } }), (/** @type {any} */ e) => {
    assert.ok(e instanceof AnnalError);
    assert.ok(e.status >= 400 && e.status < 500, String(e.status));
    return true;
  });
  // A sealed payload: the client draws the salt and signs the commitment the event carries.
  const sealed = await signed.submit({ type: "create", target: "workspace/sealed.md", payload: { secret: "x" }, seal: true });
  const sev = decode((await signed.fetchAndVerify(sealed.index, annald.verifierKey)).entry);
  assert.equal(sev.action.payload, undefined);
  assert.match(sev.action.sealed.commitment, /^sha256:[0-9a-f]{64}$/);
  assert.equal(sev.action.sealed.subject, a.id);
});
