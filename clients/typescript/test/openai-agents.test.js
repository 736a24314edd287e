// The OpenAI Agents SDK adapter: an agent loop of the real @openai/agents
// with a scripted model (no network) against a real annald. An allowed
// call runs and is in the log with the OIDs of its arguments and output; a
// denied one never runs and the model sees the kernel's reason; a held one
// is the SDK's approval interruption, runs only after a human approves in
// annald, and never after a rejection; a read-only tool is an observe.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Agent, Runner, Usage, tool } from "@openai/agents";
import { z } from "zod";
import { AnnalAgentTools } from "@annal/client/openai-agents";
import { adapterWorld, assertCallLogged, assertDenialSeen, assertResultNamesApproval, entriesSince, logSize } from "./adapters.js";

/** @type {Awaited<ReturnType<typeof adapterWorld>>} */
let w;
before(async () => {
  w = await adapterWorld();
});
after(async () => {
  await w?.annald.stop();
});

/**
 * A model that calls one tool with args, then answers with the text of
 * what the tool gave back; it keeps every request's input.
 * @param {string} name @param {Record<string, unknown>} args
 */
function scriptedModel(name, args) {
  /** @type {any[]} */
  const requests = [];
  let turn = 0;
  const model = {
    requests,
    /** @param {any} request */
    async getResponse(request) {
      requests.push(request);
      const usage = new Usage();
      if (turn++ === 0) {
        const call = { type: "function_call", callId: `call_${name}_${turn}`, name, arguments: JSON.stringify(args), status: "completed" };
        return { usage, output: [call], responseId: `r${turn}` };
      }
      const results = request.input.filter((/** @type {any} */ i) => i.type === "function_call_result");
      const text = results.map((/** @type {any} */ r) => (typeof r.output === "string" ? r.output : r.output?.text ?? JSON.stringify(r.output))).join("\n");
      return {
        usage,
        output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }],
        responseId: `r${turn}`,
      };
    },
    getStreamedResponse() {
      throw new Error("not streamed");
    },
  };
  return model;
}

/** The tools, counting their runs. */
function makeTools() {
  const ran = { add: 0, rm: 0, deploy: 0, lookup: 0 };
  const tools = [
    tool({ name: "add", description: "adds", parameters: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => (ran.add++, { sum: a + b }) }),
    tool({ name: "rm", description: "removes a file", parameters: z.object({ path: z.string() }), execute: () => (ran.rm++, "removed") }),
    tool({ name: "deploy", description: "deploys", parameters: z.object({ version: z.string() }), execute: ({ version }) => (ran.deploy++, `deployed ${version}`) }),
    tool({ name: "lookup", description: "reads", parameters: z.object({ key: z.string() }), execute: ({ key }) => (ran.lookup++, `value of ${key}`) }),
  ];
  return { ran, tools };
}

/** @param {string} name @param {Record<string, unknown>} args @param {{onHold?: "interrupt" | "wait", onHeld?: (id: string) => void}} [opts] */
function setup(name, args, opts = {}) {
  if (!w) throw new Error("no annald");
  const { ran, tools } = makeTools();
  const annal = new AnnalAgentTools(w.agent, { readOnly: ["lookup"], pollMs: 20, ...opts });
  const model = scriptedModel(name, args);
  const asModel = /** @type {import("@openai/agents").Model} */ (/** @type {unknown} */ (model));
  const agent = new Agent({ name: "worker", instructions: "use tools", model: asModel, tools: annal.wrap(tools) });
  const runner = new Runner({ tracingDisabled: true });
  return { ran, annal, model, agent, runner };
}

test("openai-agents: an allowed call runs and is in the log, its intent's input the OID of its arguments", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const from = await logSize(w.agent);
  const { ran, agent, runner } = setup("add", { a: 2, b: 40 });
  const result = await runner.run(agent, "add 2 and 40");
  assert.equal(ran.add, 1);
  assert.equal(result.finalOutput, JSON.stringify({ sum: 42 }));
  await assertCallLogged(w.agent, from, { tool: "add", args: { a: 2, b: 40 }, output: { sum: 42 }, by: "openai-agents", callId: /^call_add_/ });
});

test("openai-agents: a denied call never runs; the model sees the kernel's reason", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const { ran, agent, runner, model } = setup("rm", { path: "/etc/passwd" });
  const result = await runner.run(agent, "remove it");
  assert.equal(ran.rm, 0);
  await assertDenialSeen(w.agent, JSON.stringify(model.requests[1].input), "rm");
  assert.match(String(result.finalOutput), /annal refused this call of rm/);
});

test("openai-agents: a held call is the SDK's interruption and runs only after a human approves in annald", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const world = w;
  /** @type {string[]} */
  const held = [];
  const { ran, annal, agent, runner } = setup("deploy", { version: "v1" }, { onHeld: (id) => held.push(id) });
  const first = await runner.run(agent, "deploy v1");
  assert.equal(first.interruptions.length, 1);
  assert.equal(held.length, 1);
  assert.equal(ran.deploy, 0, "the held call ran before a human answered");
  // The human answers in annald while the program waits on it.
  const answered = annal.answerInterruptions(first);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(ran.deploy, 0);
  await world.root.answerHold(held[0], "approve", "go ahead");
  assert.equal(await answered, 1);
  const from = await logSize(world.agent);
  const second = await runner.run(agent, first.state);
  assert.equal(ran.deploy, 1);
  assert.equal(second.finalOutput, "deployed v1");
  await assertResultNamesApproval(world.agent, from, held[0]);
});

test("openai-agents: a held call a human rejects never runs, and the model sees why", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const world = w;
  /** @type {string[]} */
  const held = [];
  const { ran, annal, agent, runner, model } = setup("deploy", { version: "v2" }, { onHeld: (id) => held.push(id) });
  const first = await runner.run(agent, "deploy v2");
  assert.equal(first.interruptions.length, 1);
  await world.root.answerHold(held[0], "reject", "not on a Friday");
  assert.equal(await annal.answerInterruptions(first), 1);
  await runner.run(agent, first.state);
  assert.equal(ran.deploy, 0);
  assert.match(JSON.stringify(model.requests.at(-1).input), /was rejected by .*: not on a Friday/);
});

test("openai-agents: with onHold wait, a held call waits inside the run for the human", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const world = w;
  const { ran, agent, runner } = setup("deploy", { version: "v3" }, {
    onHold: "wait",
    onHeld: (id) => void world.root.answerHold(id, "approve", "fine"),
  });
  const result = await runner.run(agent, "deploy v3");
  assert.equal(result.interruptions.length, 0);
  assert.equal(ran.deploy, 1);
  assert.equal(result.finalOutput, "deployed v3");
});

test("openai-agents: a read-only tool is an observe of its target, with no intent", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const from = await logSize(w.agent);
  const { ran, agent, runner } = setup("lookup", { key: "k" });
  await runner.run(agent, "look k up");
  assert.equal(ran.lookup, 1);
  const log = await entriesSince(w.agent, from);
  assert.ok(log.some((e) => e.action?.type === "observe" && e.action.target === "tools/lookup"));
  assert.ok(!log.some((e) => e.action?.type === "execute"));
});
