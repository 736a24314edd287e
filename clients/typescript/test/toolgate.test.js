// The gate every adapter shares, against a real annald: a tool that throws
// has its failure recorded as the intent's result (exit code 1) and the
// error goes on; a call decided before is not decided again.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { contentID } from "@annal/client";
import { ToolGate } from "@annal/client/langchain";
import { adapterWorld, entriesSince, logSize } from "./adapters.js";

/** @type {Awaited<ReturnType<typeof adapterWorld>>} */
let w;
before(async () => {
  w = await adapterWorld();
});
after(async () => {
  await w?.annald.stop();
});

test("toolgate: a tool that throws is recorded as the intent's result with exit code 1, and the error goes on", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const from = await logSize(w.agent);
  const gate = new ToolGate(w.agent, { by: "test" });
  await assert.rejects(
    gate.run({ name: "add", args: { a: 1 }, callId: "c1" }, () => {
      throw new Error("boom");
    }),
    /^Error: boom$/,
  );
  const log = await entriesSince(w.agent, from);
  const res = log.find((e) => e.action?.payload?.intent !== undefined);
  assert.ok(res, "no result recorded");
  assert.equal(res.action.payload.exit_code, 1);
  assert.equal(res.action.payload.output_oid, (await contentID({ error: "boom" })).oid);
});

test("toolgate: a call decided before is not decided again, and runs under that decision", async (t) => {
  if (!w) return t.skip("go is not installed (set ANNALD or install go)");
  const from = await logSize(w.agent);
  const gate = new ToolGate(w.agent);
  const call = { name: "add", args: { a: 1, b: 2 }, callId: "c2" };
  const d1 = await gate.decide(call, { wait: false });
  const d2 = await gate.decide(call, { wait: false });
  assert.equal(d1, d2);
  assert.equal(await gate.run(call, () => 3), 3);
  const intents = (await entriesSince(w.agent, from)).filter((e) => e.action?.payload?.phase === "intent");
  assert.equal(intents.length, 1);
});
