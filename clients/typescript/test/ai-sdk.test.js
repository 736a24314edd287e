// The Vercel AI SDK adapter: generateText of the real `ai` with its mock
// language model (ai/test, no network) against a real annald. An allowed
// call runs and is in the log with the OIDs of its arguments and output; a
// denied one never runs and the model sees the kernel's reason; a held one
// is the SDK's tool approval, runs only after a human approves in annald,
// and never after a rejection.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { generateText, simulateReadableStream, stepCountIs, streamText, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";
import { AnnalAITools } from "@annal/client/ai-sdk";
import { adapterWorld, assertCallLogged, assertDenialSeen, assertResultNamesApproval, entriesSince, logSize } from "./adapters.js";

/** @type {Awaited<ReturnType<typeof adapterWorld>>} */
let w;
before(async () => {
  w = await adapterWorld();
});
after(async () => {
  await w?.annald.stop();
});

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/**
 * A mock model that calls one tool with args, then answers with the text
 * of the tool results it was given; it keeps every prompt.
 * @param {string} name @param {Record<string, unknown>} args
 */
function scriptedModel(name, args) {
  /** @type {any[]} */
  const prompts = [];
  let turn = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      if (turn++ === 0) {
        return {
          content: [{ type: "tool-call", toolCallId: `call_${name}_${turn}`, toolName: name, input: JSON.stringify(args) }],
          finishReason: { unified: "tool-calls", raw: undefined },
          usage,
          warnings: [],
        };
      }
      const results = options.prompt.flatMap((m) => (m.role === "tool" ? m.content : [])).filter((p) => p.type === "tool-result");
      const text = results.map((p) => JSON.stringify(p.output)).join("\n");
      return { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] };
    },
  });
  return { model, prompts };
}

function makeTools() {
  const ran = { add: 0, rm: 0, deploy: 0, lookup: 0 };
  const tools = {
    add: tool({ description: "adds", inputSchema: z.object({ a: z.number(), b: z.number() }), execute: async ({ a, b }) => (ran.add++, { sum: a + b }) }),
    rm: tool({ description: "removes a file", inputSchema: z.object({ path: z.string() }), execute: async () => (ran.rm++, "removed") }),
    deploy: tool({ description: "deploys", inputSchema: z.object({ version: z.string() }), execute: async ({ version }) => (ran.deploy++, `deployed ${version}`) }),
    lookup: tool({ description: "reads", inputSchema: z.object({ key: z.string() }), execute: async ({ key }) => (ran.lookup++, `value of ${key}`) }),
  };
  return { ran, tools };
}

/** @param {string} name @param {Record<string, unknown>} args @param {{onHold?: "approval" | "wait", onHeld?: (id: string) => void}} [opts] */
function setup(name, args, opts = {}) {
  if (!w) throw new Error("no annald");
  const { ran, tools } = makeTools();
  const annal = new AnnalAITools(w.agent, { readOnly: ["lookup"], pollMs: 20, ...opts });
  return { ran, annal, tools: annal.wrap(tools), ...scriptedModel(name, args) };
}

test("ai-sdk: an allowed call runs and is in the log, its intent's input the OID of its arguments", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const from = await logSize(w.agent);
  const { ran, tools, model } = setup("add", { a: 2, b: 40 });
  const result = await generateText({ model, tools, prompt: "add 2 and 40", stopWhen: stepCountIs(5) });
  assert.equal(ran.add, 1);
  assert.match(result.text, /"sum":42/);
  await assertCallLogged(w.agent, from, { tool: "add", args: { a: 2, b: 40 }, output: { sum: 42 }, by: "ai-sdk", callId: "call_add_1" });
});

test("ai-sdk: a denied call never runs; the model sees the kernel's reason", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const { ran, tools, model, prompts } = setup("rm", { path: "/etc/passwd" });
  await generateText({ model, tools, prompt: "remove it", stopWhen: stepCountIs(5) });
  assert.equal(ran.rm, 0);
  await assertDenialSeen(w.agent, JSON.stringify(prompts[1]), "rm");
});

test("ai-sdk: a held call is the SDK's tool approval and runs only after a human approves in annald", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const world = w;
  /** @type {string[]} */
  const held = [];
  const { ran, annal, tools, model } = setup("deploy", { version: "v1" }, { onHeld: (id) => held.push(id) });
  /** @type {import("ai").ModelMessage[]} */
  const messages = [{ role: "user", content: "deploy v1" }];
  const first = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
  assert.equal(first.content.filter((p) => p.type === "tool-approval-request").length, 1);
  assert.equal(ran.deploy, 0, "the held call ran before a human answered");
  const answers = annal.approvalResponses(first);
  await world.root.answerHold(held[0], "approve", "go ahead");
  const reply = await answers;
  assert.ok(reply);
  assert.equal(reply.content[0].approved, true);
  const from = await logSize(world.agent);
  const second = await generateText({ model, tools, messages: [...messages, ...first.response.messages, reply], stopWhen: stepCountIs(5) });
  assert.equal(ran.deploy, 1);
  assert.match(second.text, /deployed v1/);
  await assertResultNamesApproval(world.agent, from, held[0]);
});

test("ai-sdk: a held call a human rejects never runs, and the model sees why", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const world = w;
  /** @type {string[]} */
  const held = [];
  const { ran, annal, tools, model, prompts } = setup("deploy", { version: "v2" }, { onHeld: (id) => held.push(id) });
  /** @type {import("ai").ModelMessage[]} */
  const messages = [{ role: "user", content: "deploy v2" }];
  const first = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
  await world.root.answerHold(held[0], "reject", "not on a Friday");
  const reply = await annal.approvalResponses(first);
  assert.ok(reply);
  await generateText({ model, tools, messages: [...messages, ...first.response.messages, reply], stopWhen: stepCountIs(5) });
  assert.equal(ran.deploy, 0);
  assert.match(JSON.stringify(prompts.at(-1)), /was rejected by .*: not on a Friday/);
});

test("ai-sdk: with onHold wait, a held call waits inside execute for the human", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const world = w;
  const { ran, tools, model } = setup("deploy", { version: "v3" }, {
    onHold: "wait",
    onHeld: (id) => void world.root.answerHold(id, "approve", "fine"),
  });
  const result = await generateText({ model, tools, prompt: "deploy v3", stopWhen: stepCountIs(5) });
  assert.equal(ran.deploy, 1);
  assert.match(result.text, /deployed v3/);
});

test("ai-sdk: a read-only tool is an observe of its target, with no intent", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const from = await logSize(w.agent);
  const { ran, tools, model } = setup("lookup", { key: "k" });
  const result = await generateText({ model, tools, prompt: "look k up", stopWhen: stepCountIs(5) });
  assert.equal(ran.lookup, 1);
  assert.match(result.text, /value of k/);
  const log = await entriesSince(w.agent, from);
  assert.ok(log.some((e) => e.action?.type === "observe" && e.action.target === "tools/lookup"));
  assert.ok(!log.some((e) => e.action?.type === "execute"));
});

test("ai-sdk: streamText puts its tool calls through the kernel the same way", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const from = await logSize(w.agent);
  const { ran, tools } = setup("add", { a: 2, b: 40 });
  let turn = 0;
  const finish = (/** @type {"tool-calls" | "stop"} */ unified) => ({ type: /** @type {const} */ ("finish"), finishReason: { unified, raw: undefined }, usage });
  const model = new MockLanguageModelV3({
    doStream: async () => ({
      stream: simulateReadableStream({
        /** @type {import("@ai-sdk/provider").LanguageModelV3StreamPart[]} */
        chunks:
          turn++ === 0
            ? [{ type: "tool-call", toolCallId: "call_s1", toolName: "add", input: '{"a":2,"b":40}' }, finish("tool-calls")]
            : [{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "done" }, { type: "text-end", id: "t" }, finish("stop")],
      }),
    }),
  });
  const result = streamText({ model, tools, prompt: "add 2 and 40", stopWhen: stepCountIs(5) });
  assert.equal(await result.text, "done");
  assert.equal(ran.add, 1);
  await assertCallLogged(w.agent, from, { tool: "add", args: { a: 2, b: 40 }, output: { sum: 42 }, by: "ai-sdk", callId: "call_s1" });
});
