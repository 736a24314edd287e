// The LangChain JS adapter: an agent loop over @langchain/core's fake chat
// model (FakeListChatModel, scripted to answer with tool calls; no network)
// and real LangChain tools against a real annald. An allowed call runs and
// is in the log with the OIDs of its arguments and output; a denied one
// never runs and the model sees the kernel's reason; a held one runs only
// after a human approves in annald, and never after a rejection.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { FakeListChatModel } from "@langchain/core/utils/testing";
import { z } from "zod";
import { AnnalLangChainTools } from "@annal/client/langchain";
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
 * The fake chat model of @langchain/core, whose scripted responses that
 * start with "call " are tool calls ("call <tool> <json args>"), keeping
 * every list of messages it was given.
 */
class ScriptedToolModel extends FakeListChatModel {
  /** @type {import("@langchain/core/messages").BaseMessage[][]} */
  seen = [];
  /** @param {import("@langchain/core/messages").BaseMessage[]} messages @param {any} options @param {any} [runManager] */
  async _generate(messages, options, runManager) {
    this.seen.push(messages);
    return super._generate(messages, options, runManager);
  }
  /** @param {string} text */
  _formatGeneration(text) {
    const m = /^call (\S+) (.*)$/.exec(text);
    if (!m) return super._formatGeneration(text);
    const message = new AIMessage({ content: "", tool_calls: [{ id: `call_${m[1]}`, name: m[1], args: JSON.parse(m[2]) }] });
    return { message, text: "" };
  }
}

/**
 * The agent loop: ask the model, run the tool calls it makes (through the
 * tools), give it their messages, until it answers in text.
 * @param {ScriptedToolModel} model @param {any[]} tools @param {string} prompt
 */
async function agentLoop(model, tools, prompt) {
  /** @type {import("@langchain/core/messages").BaseMessage[]} */
  const messages = [new HumanMessage(prompt)];
  for (let step = 0; step < 5; step++) {
    const ai = /** @type {AIMessage} */ (await model.invoke(messages));
    messages.push(ai);
    if (!ai.tool_calls?.length) return { answer: String(ai.content), messages };
    for (const call of ai.tool_calls) {
      const t = tools.find((x) => x.name === call.name);
      messages.push(await t.invoke({ ...call, type: "tool_call" }));
    }
  }
  throw new Error("the loop did not end");
}

function makeTools() {
  const ran = { add: 0, rm: 0, deploy: 0, lookup: 0 };
  const tools = [
    tool(async ({ a, b }) => (ran.add++, JSON.stringify({ sum: a + b })), { name: "add", description: "adds", schema: z.object({ a: z.number(), b: z.number() }) }),
    tool(async () => (ran.rm++, "removed"), { name: "rm", description: "removes a file", schema: z.object({ path: z.string() }) }),
    tool(async ({ version }) => (ran.deploy++, `deployed ${version}`), { name: "deploy", description: "deploys", schema: z.object({ version: z.string() }) }),
    tool(async ({ key }) => (ran.lookup++, `value of ${key}`), { name: "lookup", description: "reads", schema: z.object({ key: z.string() }) }),
  ];
  return { ran, tools };
}

/** @param {string} call @param {{onHeld?: (id: string) => void}} [opts] */
function setup(call, opts = {}) {
  if (!w) throw new Error("no annald");
  const { ran, tools } = makeTools();
  const annal = new AnnalLangChainTools(w.agent, { readOnly: ["lookup"], pollMs: 20, ...opts });
  const model = new ScriptedToolModel({ responses: [call, "done"] });
  return { ran, tools: annal.wrap(tools), model };
}

test("langchain: an allowed call runs and is in the log, its intent's input the OID of its arguments", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const from = await logSize(w.agent);
  const { ran, tools, model } = setup('call add {"a":2,"b":40}');
  const { messages } = await agentLoop(model, tools, "add 2 and 40");
  assert.equal(ran.add, 1);
  const reply = /** @type {ToolMessage} */ (messages[2]);
  assert.equal(reply.content, '{"sum":42}');
  assert.equal(reply.status, "success");
  await assertCallLogged(w.agent, from, { tool: "add", args: { a: 2, b: 40 }, output: '{"sum":42}', by: "langchain", callId: "call_add" });
});

test("langchain: a denied call never runs; the model sees the kernel's reason", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const { ran, tools, model } = setup('call rm {"path":"/etc/passwd"}');
  await agentLoop(model, tools, "remove it");
  assert.equal(ran.rm, 0);
  const last = model.seen.at(-1) ?? [];
  const reply = /** @type {ToolMessage} */ (last.at(-1));
  assert.equal(reply.status, "error");
  await assertDenialSeen(w.agent, String(reply.content), "rm");
});

test("langchain: a held call runs only after a human approves in annald", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const world = w;
  /** @type {string[]} */
  const held = [];
  const { ran, tools, model } = setup('call deploy {"version":"v1"}', { onHeld: (id) => held.push(id) });
  const from = await logSize(world.agent);
  const loop = agentLoop(model, tools, "deploy v1");
  while (held.length === 0) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(ran.deploy, 0, "the held call ran before a human answered");
  await world.root.answerHold(held[0], "approve", "go ahead");
  const { messages } = await loop;
  assert.equal(ran.deploy, 1);
  assert.equal(messages[2].content, "deployed v1");
  await assertResultNamesApproval(world.agent, from, held[0]);
});

test("langchain: a held call a human rejects never runs, and the model sees why", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const world = w;
  const { ran, tools, model } = setup('call deploy {"version":"v2"}', {
    onHeld: (id) => void world.root.answerHold(id, "reject", "not on a Friday"),
  });
  const { messages } = await agentLoop(model, tools, "deploy v2");
  assert.equal(ran.deploy, 0);
  const reply = /** @type {ToolMessage} */ (messages[2]);
  assert.equal(reply.status, "error");
  assert.match(String(reply.content), /was rejected by .*: not on a Friday/);
});

test("langchain: a read-only tool is an observe of its target, with no intent", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const from = await logSize(w.agent);
  const { ran, tools, model } = setup('call lookup {"key":"k"}');
  await agentLoop(model, tools, "look k up");
  assert.equal(ran.lookup, 1);
  const log = await entriesSince(w.agent, from);
  assert.ok(log.some((e) => e.action?.type === "observe" && e.action.target === "tools/lookup"));
  assert.ok(!log.some((e) => e.action?.type === "execute"));
});
