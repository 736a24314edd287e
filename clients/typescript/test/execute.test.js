// The execute intent's payloads and content ids against every vector of
// testvectors/execute.json (the known answers the Go code passes), and an
// intent decided, held, approved, rejected and denied by a real annald.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import {
  AnnalClient,
  AnnalError,
  HoldRefusedError,
  canonicalCommand,
  canonicalJSON,
  canonicalToolCall,
  canonicalToolResult,
  contentID,
  intentPayload,
  oidOf,
  resultPayload,
} from "@annal/client";
import { vectors } from "./helpers.js";
import { startAnnald } from "./annald.js";

const v = vectors("execute.json");

test("execute.json: every command's stdin OID, canonical input and input OID", async () => {
  assert.ok(v.commands.length > 0);
  for (const c of v.commands) {
    assert.equal(await oidOf(c.stdin), c.stdin_oid, c.name);
    const canon = canonicalCommand(c.argv, c.stdin_oid);
    assert.equal(canon, c.canonical, c.name);
    assert.equal(await oidOf(canon), c.input_oid, c.name);
  }
  assert.throws(() => canonicalCommand([], v.commands[0].stdin_oid), /no command/);
});

test("execute.json: every tool call's canonical input and input OID", async () => {
  assert.ok(v.tool_calls.length > 0);
  for (const c of v.tool_calls) {
    const canon = canonicalToolCall(c.server, c.tool, c.arguments);
    assert.equal(canon, c.canonical, c.name);
    assert.equal(await oidOf(canon), c.input_oid, c.name);
  }
});

test("execute.json: every tool result's canonical output and output OID", async () => {
  assert.ok(v.tool_results.length > 0);
  for (const r of v.tool_results) {
    const canon = canonicalToolResult(r.result);
    assert.equal(canon, r.canonical, r.name);
    assert.equal(await oidOf(canon), r.output_oid, r.name);
  }
  assert.throws(() => canonicalToolResult([]), /a tool result is a JSON object/);
  assert.throws(() => canonicalToolResult({ isError: "yes" }), /isError is not a boolean/);
});

test("execute.json: every intent's and result's payload", () => {
  assert.ok(v.intents.length > 0 && v.results.length > 0);
  for (const i of v.intents) assert.equal(canonicalJSON(intentPayload(i.input_oid, i.about)), i.payload, i.name);
  for (const r of v.results) {
    const p = resultPayload({
      intent: r.intent,
      inputOID: r.input_oid,
      outputOID: r.output_oid,
      artifactHash: r.artifact_hash,
      exitCode: r.exit_code,
      outputBytes: r.output_bytes,
      about: r.about,
    });
    assert.equal(canonicalJSON(p), r.payload, r.name);
  }
  // A description may not set what the kernel reads from the intent or its result.
  for (const k of ["phase", "input_oid", "intent", "output_oid", "artifact_hash", "exit_code", "output_bytes"]) {
    assert.throws(() => intentPayload(v.intents[0].input_oid, { [k]: 1 }), /is not a description member/);
  }
  const ok = { intent: 1, inputOID: "x", outputOID: "y", artifactHash: "y" };
  assert.throws(() => resultPayload({ ...ok, exitCode: 2 ** 31 }), /32 bits/);
  assert.throws(() => resultPayload({ ...ok, outputBytes: 2 ** 40 + 1 }), /2\^40/);
});

test("contentID: the RFC 8785 form's OID and size, however the value is spelled", async () => {
  const a = await contentID({ b: 2.5, a: 100.0 });
  assert.deepEqual(a, { oid: await oidOf('{"a":100,"b":2.5}'), size: 17 });
  assert.deepEqual(await contentID(undefined), await contentID(null));
});

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
  const grants = [{ pattern: "tools/**", actions: ["execute"] }];
  const a = await root.createAgent({ name: "runner", purpose: "runs tools", energy: 100000, trust: 0.9, grants });
  await root.issueEnvelope({
    holder: a.id,
    budget: 10000,
    grants: [{ pattern: "tools/**", actions: ["execute"] }],
    hold_on: [{ pattern: "tools/deploy", actions: ["execute"] }],
  });
  agent = new AnnalClient(annald.url, { credential: a.credential });
});

after(async () => {
  await annald?.stop();
});

const entry = async (/** @type {number} */ i) => JSON.parse(new TextDecoder().decode(await agent.event(i)));

test("decideIntent: an allowed intent and its result are in the log, the result naming it", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const input = await oidOf(canonicalToolCall("local", "add", { a: 1, b: 2 }));
  const intent = await agent.decideIntent({ target: "tools/add", input, about: { tool: "add" } });
  assert.equal(intent.holdId, undefined);
  const ev = await entry(intent.index);
  assert.deepEqual(ev.action.payload, { phase: "intent", input_oid: input, tool: "add" });
  const out = await contentID({ sum: 3 });
  const rc = await agent.recordResult(intent, { outputOID: out.oid, outputBytes: out.size });
  const res = await entry(rc.index);
  assert.equal(res.action.payload.intent, intent.index);
  assert.equal(res.action.payload.output_oid, out.oid);
  assert.equal(res.action.payload.artifact_hash, out.oid);
  // An intent has at most one result.
  await assert.rejects(agent.recordResult(intent, { outputOID: out.oid }), AnnalError);
});

test("decideIntent: a held intent waits for a human; approved, its result names the approval", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const input = await oidOf("deploy v1");
  /** @type {string[]} */
  const held = [];
  const decided = agent.decideIntent({
    target: "tools/deploy",
    input,
    pollMs: 20,
    onHeld: (id) => {
      held.push(id);
      root.answerHold(id, "approve", "ship it");
    },
  });
  const intent = await decided;
  assert.equal(held.length, 1);
  assert.equal(intent.holdId, held[0]);
  const h = await agent.hold(held[0]);
  assert.equal(intent.index, h.answered_at);
  const rc = await agent.recordResult(intent, { outputOID: input });
  assert.equal((await entry(rc.index)).action.payload.intent, h.answered_at);
});

test("decideIntent: a rejected hold is a HoldRefusedError; a denial is the kernel's AnnalError", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const input = await oidOf("deploy v2");
  await assert.rejects(
    agent.decideIntent({ target: "tools/deploy", input, pollMs: 20, onHeld: (id) => root.answerHold(id, "reject", "not today") }),
    (e) => e instanceof HoldRefusedError && e.hold.status === "rejected" && /was rejected by .*: not today$/.test(e.message),
  );
  await assert.rejects(agent.decideIntent({ target: "files/etc/passwd", input }), (e) => {
    assert.ok(e instanceof AnnalError);
    assert.equal(e.status, 403);
    assert.equal(typeof e.denialIndex, "number");
    return true;
  });
});
