// Shared setup of the adapters' tests: a real annald, a human who answers
// holds, and an agent whose envelope grants some tools, holds one
// (tools/deploy) and leaves tools/rm out, so that a call of rm is denied.
import assert from "node:assert/strict";
import { AnnalClient, contentID } from "@annal/client";
import { startAnnald } from "./annald.js";

export const GRANTS = [
  { pattern: "tools/add", actions: ["execute"] },
  { pattern: "tools/deploy", actions: ["execute"] },
  { pattern: "tools/lookup", actions: ["observe"] },
];

/** Starts annald and makes the agent; undefined without go (the test skips). */
export async function adapterWorld() {
  const annald = await startAnnald();
  if (!annald) return undefined;
  const root = new AnnalClient(annald.url, { credential: annald.rootCredential });
  const a = await root.createAgent({ name: "tool-user", purpose: "calls tools", energy: 1_000_000, trust: 0.9, grants: GRANTS });
  await root.issueEnvelope({
    holder: a.id,
    budget: 100_000,
    grants: GRANTS,
    hold_on: [{ pattern: "tools/deploy", actions: ["execute"] }],
  });
  const agent = new AnnalClient(annald.url, { credential: a.credential });
  return { annald, root, agent, agentId: a.id };
}

/** The log's entries from index from on, parsed. @param {AnnalClient} c @param {number} from */
export async function entriesSince(c, from) {
  const { size } = await c.info();
  const out = [];
  for (let i = from; i < size; i++) out.push({ index: i, ...JSON.parse(new TextDecoder().decode(await c.event(i))) });
  return out;
}

/** The log's size now. @param {AnnalClient} c */
export async function logSize(c) {
  return (await c.info()).size;
}

/**
 * Asserts that a call of tool with args is in the log since from: its
 * intent on tools/<tool>, input the OID of args, described by by and the
 * call's id; its result naming the intent, output the OID of output.
 * @param {AnnalClient} c @param {number} from
 * @param {{tool: string, args: unknown, output: unknown, by: string, callId: RegExp | string}} want
 */
export async function assertCallLogged(c, from, want) {
  const log = await entriesSince(c, from);
  const intent = log.find((e) => e.action?.type === "execute" && e.action.payload?.phase === "intent");
  assert.ok(intent, "no intent in the log");
  assert.equal(intent.action.target, `tools/${want.tool}`);
  assert.equal(intent.action.payload.input_oid, (await contentID(want.args)).oid);
  assert.equal(intent.action.payload.tool, want.tool);
  assert.equal(intent.action.payload.by, want.by);
  assert.match(intent.action.payload.tool_use_id, typeof want.callId === "string" ? new RegExp(`^${want.callId}$`) : want.callId);
  const res = log.find((e) => e.action?.payload?.intent === intent.index);
  assert.ok(res, "no result names the intent");
  assert.equal(res.action.payload.input_oid, intent.action.payload.input_oid);
  assert.equal(res.action.payload.output_oid, (await contentID(want.output)).oid);
  assert.equal(res.action.payload.exit_code, 0);
}

/**
 * Asserts that seen, what the model was given, holds the kernel's denial
 * of a call of tool, and that the denial it names is in the log.
 * @param {AnnalClient} c @param {string} seen @param {string} tool
 */
export async function assertDenialSeen(c, seen, tool) {
  const re = new RegExp(`annal refused this call of ${tool}: annal: 403 Forbidden \\(stage \\w+\\): .+? \\(the denial is recorded in the log at index (\\d+)\\)`);
  const m = re.exec(seen);
  assert.ok(m, `the model did not see the denial: ${seen}`);
  const denial = JSON.parse(new TextDecoder().decode(await c.event(Number(m[1]))));
  assert.equal(denial.action.target, `tools/${tool}`);
  assert.ok(denial.denial, "the entry is not a denial");
}

/**
 * Asserts that the result recorded since from names the approval of hold.
 * @param {AnnalClient} c @param {number} from @param {string} holdId
 */
export async function assertResultNamesApproval(c, from, holdId) {
  const h = await c.hold(holdId);
  const res = (await entriesSince(c, from)).find((e) => e.action?.payload?.intent !== undefined);
  assert.ok(res, "no result in the log");
  assert.equal(res.action.payload.intent, h.answered_at, "the result does not name the approval");
}
