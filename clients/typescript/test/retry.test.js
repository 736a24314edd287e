// The client's retry rule, as the annal CLI's (client.RetryPolicy): a 429,
// a 503 and a retryable 409 are sent again, after the answer's Retry-After
// when it is longer than the policy's wait; an outcome_unknown answer and a
// stopped kernel never are. A small HTTP server on 127.0.0.1 answers what
// each case needs: it tests the client's rule, not annald (whose 429 is
// shown in client.test.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { AnnalClient, AnnalError } from "@annal/client";
import { serveLocally } from "./helpers.js";

/** @type {{status: number, body: object, retryAfter?: string}[]} */
let script = [];
/** @type {{method: string, url: string, at: number}[]} */
let seen = [];
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    seen.push({ method: /** @type {string} */ (req.method), url: /** @type {string} */ (req.url), at: Date.now() });
    const next = script.shift() ?? { status: 200, body: ok(req.url ?? "") };
    /** @type {Record<string, string>} */
    const headers = { "Content-Type": "application/json" };
    if (next.retryAfter) headers["Retry-After"] = next.retryAfter;
    res.writeHead(next.status, headers);
    res.end(JSON.stringify(next.body));
  });
});

/** A success answer of each route the tests call. */
function ok(/** @type {string} */ url) {
  const hello = { oid: "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", size: 5 };
  if (url.startsWith("/v1/blobs")) return hello;
  if (url.startsWith("/v1/vfs/")) return { uri: "vfs://agent-a/mem/working/x", ...hello, receipt: {} };
  return { status: "committed", event_id: "e", index: 7, leaf_hash: "", time: "", actor: "a", type: "create", target: "t", cost: 1 };
}

const local = serveLocally(server);

const policy = { attempts: 6, firstMs: 5, maxMs: 50 };
const action = /** @type {const} */ ({ type: "create", target: "workspace/x", payload: 1 });

/** Runs call against script; returns the error or result and the requests seen. */
async function run(/** @type {typeof script} */ s, /** @type {(c: AnnalClient) => Promise<unknown>} */ call, retry = policy) {
  script = s;
  seen = [];
  const c = new AnnalClient(local.url, { credential: "c", retry });
  const out = await call(c).then(
    (v) => ({ value: v, error: undefined }),
    (/** @type {unknown} */ e) => ({ value: undefined, error: e }),
  );
  return { ...out, seen: [...seen] };
}

const busy = { status: 503, body: { error: "busy", retryable: true }, retryAfter: "0" };
const limited = { status: 429, body: { error: "rate limit", retryable: true } };
const conflict = { status: 409, body: { error: "the envelope changed under the decision", retryable: true } };

test("retry: submit is sent again after a 503, a 429 and a retryable 409, then succeeds", async () => {
  const r = await run([busy, limited, conflict], (c) => c.submit(action));
  assert.equal(r.error, undefined, String(r.error));
  assert.equal(/** @type {any} */ (r.value).index, 7);
  assert.equal(r.seen.length, 4);
  assert.ok(r.seen.every((s) => s.method === "POST" && s.url === "/v1/actions"));
});

test("retry: every write follows the same rule (a file, a blob, a revocation, a hold's answer)", async () => {
  const calls = /** @type {[string, (c: AnnalClient) => Promise<unknown>][]} */ ([
    ["PUT", (c) => c.vfsPut("vfs://agent-a/mem/working/x", "hello")],
    ["POST", (c) => c.putBlob("hello")],
    ["POST", (c) => c.revokeEnvelope("env-1", "done")],
    ["POST", (c) => c.answerHold("hold-1", "approve")],
    ["POST", (c) => c.eraseSubject("s-1")],
  ]);
  for (const [method, call] of calls) {
    const r = await run([busy, limited], call);
    assert.equal(r.error, undefined, String(r.error));
    assert.equal(r.seen.length, 3, r.seen.map((s) => s.url).join(" "));
    assert.ok(r.seen.every((s) => s.method === method));
  }
});

test("retry: an outcome_unknown answer is never sent again, even as a 503", async () => {
  const r = await run([{ status: 503, body: { error: "the log write failed", outcome_unknown: true } }], (c) => c.submit(action));
  assert.ok(r.error instanceof AnnalError);
  assert.equal(r.error.outcomeUnknown, true);
  assert.equal(r.error.shouldRetry, false);
  assert.equal(r.seen.length, 1);
});

test("retry: a stopped kernel and a plain 409 or 500 are not sent again", async () => {
  for (const s of [
    { status: 503, body: { error: "stopped", stopped: true } },
    { status: 409, body: { error: "conflict" } },
    { status: 500, body: { error: "boom" } },
  ]) {
    const r = await run([s], (c) => c.submit(action));
    assert.ok(r.error instanceof AnnalError);
    assert.equal(r.error.status, s.status);
    assert.equal(r.seen.length, 1, JSON.stringify(s.body));
  }
});

test("retry: the wait is the answer's Retry-After when longer; attempts bound the sends", async () => {
  const r = await run([{ ...busy, retryAfter: "1" }], (c) => c.submit(action), { attempts: 3, firstMs: 1, maxMs: 0 });
  assert.equal(r.error, undefined);
  assert.ok(r.seen[1].at - r.seen[0].at >= 950, `waited ${r.seen[1].at - r.seen[0].at} ms, the answer asked 1 s`);
  const capped = await run([busy, busy, busy, busy], (c) => c.submit(action), { attempts: 3, firstMs: 1, maxMs: 10 });
  assert.ok(capped.error instanceof AnnalError);
  assert.equal(capped.error.status, 503);
  assert.equal(capped.seen.length, 3);
  // Without a policy the client does not retry.
  script = [busy];
  seen = [];
  await assert.rejects(new AnnalClient(local.url, { credential: "c" }).submit(action), { status: 503 });
  assert.equal(seen.length, 1);
});

test("errors: a denial's stage, gate, reason and index reach the caller of every call", async () => {
  const denial = { status: 403, body: { error: "outside its grants", stage: "validate", gate: "boundary", reason: "default_deny", denial_index: 42 } };
  const calls = /** @type {((c: AnnalClient) => Promise<unknown>)[]} */ ([
    (c) => c.submit(action),
    (c) => c.whoAmI(),
    (c) => c.actor("agent-a"),
    (c) => c.actors(),
    (c) => c.budget(),
    (c) => c.envelopes(),
    (c) => c.envelope("env-1"),
    (c) => c.revokeEnvelope("env-1"),
    (c) => c.holds("pending"),
    (c) => c.history({ actor: "a" }),
    async (c) => {
      for await (const _ of c.stream({ actor: "a" })) break;
    },
    (c) => c.consistency(1, 2),
    (c) => c.putBlob("x"),
    (c) => c.blob("sha256:" + "00".repeat(32)),
    (c) => c.vfsPut("vfs://agent-a/mem/working/x", "x"),
    (c) => c.vfsList("vfs://agent-a/mem/"),
    (c) => c.vfsRead("vfs://agent-a/audit/events.jsonl"),
    (c) => c.eraseSubject("s-1"),
    (c) => c.createSession({ id: "s-1" }),
    (c) => c.changeSession("s-1", { op: "join" }),
    (c) => c.appendDelta("s-1", "t1", []),
    (c) => c.deltas("s-1"),
    (c) => c.mayEver([{ type: "create", target: "x" }]),
    (c) => c.setSigningKey("agent-a", {}),
  ]);
  for (const call of calls) {
    const r = await run([denial], call);
    assert.ok(r.error instanceof AnnalError, `${call}: ${r.error}`);
    assert.equal(r.error.stage, "validate");
    assert.equal(r.error.gate, "boundary");
    assert.equal(r.error.reason, "default_deny");
    assert.equal(r.error.denialIndex, 42);
    assert.equal(r.seen.length, 1);
  }
});
