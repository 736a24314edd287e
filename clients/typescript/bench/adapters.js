// npm run bench: each adapter's added latency per tool call. The same tool
// is called directly and through the adapter (its intent before, its result
// after, against a real annald on this machine, on 127.0.0.1), alternately
// in the same run; the table gives p50 and p90 of each, in milliseconds.
// BENCH_ITERATIONS sets the calls of each kind (default 200, at most 5000).
import { performance } from "node:perf_hooks";
import { Runner, RunContext, tool as agentsTool } from "@openai/agents";
import { tool as aiTool } from "ai";
import { tool as lcTool } from "@langchain/core/tools";
import { z } from "zod";
import { AnnalClient } from "../src/index.js";
import { AnnalAgentTools } from "../src/openai-agents.js";
import { AnnalAITools } from "../src/ai-sdk.js";
import { AnnalLangChainTools } from "../src/langchain.js";
import { startAnnald } from "../test/annald.js";

const N = Math.min(Math.max(Number.parseInt(process.env.BENCH_ITERATIONS ?? "200", 10) || 200, 10), 5000);
const WARMUP = 10;

void Runner; // the SDK's module loaded as an agent would load it
// The rate limit gate (20 requests/s at ring 2) is lifted: it would measure the limit, not the adapters.
const annald = await startAnnald(["--rate-limit", "2=100000/100000"]);
if (!annald) {
  console.error("bench: go is not installed (set ANNALD or install go)");
  process.exit(1);
}
try {
  const root = new AnnalClient(annald.url, { credential: annald.rootCredential });
  const grants = [{ pattern: "tools/**", actions: ["execute"] }];
  const a = await root.createAgent({ name: "bench", purpose: "measures adapters", energy: 900_000, trust: 0.9, grants });
  await root.issueEnvelope({ holder: a.id, budget: 800_000, grants });
  const client = new AnnalClient(annald.url, { credential: a.credential });
  const args = { a: 2, b: 40 };
  const add = (/** @type {{a: number, b: number}} */ { a, b }) => ({ sum: a + b });

  /** @type {{name: string, direct: (i: number) => Promise<unknown>, adapter: (i: number) => Promise<unknown>}[]} */
  const cases = [];

  {
    const t = agentsTool({ name: "add", description: "adds", parameters: z.object({ a: z.number(), b: z.number() }), execute: add });
    const w = /** @type {any} */ (new AnnalAgentTools(client).wrapTool(t));
    const ctx = new RunContext();
    const input = JSON.stringify(args);
    const details = (/** @type {number} */ i) => ({ toolCall: { type: "function_call", callId: `call_${i}`, name: "add", arguments: input } });
    cases.push({
      name: "openai-agents",
      direct: (i) => /** @type {any} */ (t).invoke(ctx, input, details(i)),
      // What the runner calls: needsApproval (the kernel decides), then invoke.
      adapter: async (i) => (await w.needsApproval(ctx, args, `call_${i}`), w.invoke(ctx, input, details(i))),
    });
  }
  {
    const t = aiTool({ description: "adds", inputSchema: z.object({ a: z.number(), b: z.number() }), execute: async (x) => add(x) });
    const w = /** @type {any} */ (new AnnalAITools(client).wrapTool("add", t));
    const opts = (/** @type {number} */ i) => ({ toolCallId: `call_${i}`, messages: [] });
    cases.push({
      name: "ai-sdk",
      direct: (i) => /** @type {any} */ (t).execute(args, opts(i)),
      adapter: async (i) => (await w.needsApproval(args, opts(i)), w.execute(args, opts(i))),
    });
  }
  {
    const t = lcTool(async (x) => JSON.stringify(add(x)), { name: "add", description: "adds", schema: z.object({ a: z.number(), b: z.number() }) });
    const w = new AnnalLangChainTools(client).wrapTool(t);
    const call = (/** @type {number} */ i) => ({ type: /** @type {const} */ ("tool_call"), id: `call_${i}`, name: "add", args });
    cases.push({ name: "langchain", direct: (i) => t.invoke(call(i)), adapter: (i) => w.invoke(call(i)) });
  }

  const rows = [];
  let id = 0;
  for (const c of cases) {
    /** @type {number[]} */
    const direct = [];
    /** @type {number[]} */
    const adapter = [];
    for (let i = 0; i < N + WARMUP; i++) {
      let t0 = performance.now();
      await c.direct(id++);
      const d = performance.now() - t0;
      t0 = performance.now();
      await c.adapter(id++);
      const ad = performance.now() - t0;
      if (i >= WARMUP) direct.push(d), adapter.push(ad);
    }
    rows.push({ name: c.name, direct, adapter });
  }

  const q = (/** @type {number[]} */ xs, /** @type {number} */ p) => {
    const s = [...xs].sort((x, y) => x - y);
    return s[Math.min(s.length - 1, Math.floor(p * s.length))];
  };
  const f = (/** @type {number} */ x) => x.toFixed(3).padStart(9);
  console.log(`tool call latency in ms, ${N} calls of each kind, annald on 127.0.0.1 (each adapter call: intent + result)`);
  console.log("adapter        direct p50  direct p90  adapter p50  adapter p90  added p50");
  for (const r of rows) {
    const dp50 = q(r.direct, 0.5);
    const ap50 = q(r.adapter, 0.5);
    console.log(`${r.name.padEnd(14)} ${f(dp50)}   ${f(q(r.direct, 0.9))}   ${f(ap50)}    ${f(q(r.adapter, 0.9))}   ${f(ap50 - dp50)}`);
  }
} finally {
  await annald.stop();
}
