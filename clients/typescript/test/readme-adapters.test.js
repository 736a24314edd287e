// The README's adapter examples run as pasted against a real annald, as an
// agent: LangChain's as it is; the OpenAI Agents SDK's with a scripted model
// as the SDK's default (test/fixtures/openai-scripted-model.js) and a human
// approving its held call in annald.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { AnnalClient } from "@annal/client";
import { startAnnald } from "./annald.js";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");

/** The first js example after heading. @param {string} heading */
function example(heading) {
  const at = readme.indexOf(heading);
  assert.ok(at >= 0, `README has no ${heading}`);
  const m = /```js\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(m, `README has no js example after ${heading}`);
  return m[1];
}

/** @type {Awaited<ReturnType<typeof startAnnald>>} */
let annald;
/** @type {AnnalClient} */
let root;
/** @type {string} */
let credential;

before(async () => {
  annald = await startAnnald();
  if (!annald) return;
  root = new AnnalClient(annald.url, { credential: annald.rootCredential });
  const grants = [{ pattern: "tools/**", actions: ["execute"] }];
  const a = await root.createAgent({ name: "readme-tools", purpose: "runs the README's adapters", energy: 10000, trust: 0.9, grants });
  await root.issueEnvelope({ holder: a.id, budget: 5000, grants, hold_on: [{ pattern: "tools/deploy", actions: ["execute"] }] });
  credential = a.credential;
});

after(async () => {
  await annald?.stop();
});

/**
 * Runs code as a module inside the package (so that "@annal/client"
 * resolves to it), as the agent.
 * @param {string} code @param {string[]} [nodeFlags]
 */
async function runExample(code, nodeFlags = []) {
  if (!annald) throw new Error("no annald");
  const file = new URL("../.readme-example-adapters.mjs", import.meta.url);
  writeFileSync(file, code);
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [...nodeFlags, fileURLToPath(file)], {
      env: { ...process.env, ANNAL_URL: annald.url, ANNAL_CREDENTIAL: credential, OPENAI_AGENTS_DISABLE_TRACING: "1" },
    });
    return stdout;
  } finally {
    rmSync(file, { force: true });
  }
}

test("README: the LangChain example's tool call is decided by the kernel and runs, as pasted", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const before = (await root.info()).size;
  assert.equal(await runExample(example("### LangChain JS")), "success: 42\n");
  const { size } = await root.info();
  const kinds = [];
  for (let i = before; i < size; i++) kinds.push(JSON.parse(new TextDecoder().decode(await root.event(i))).action?.payload);
  assert.ok(kinds.some((p) => p?.phase === "intent" && p.tool === "add"), "no intent of add in the log");
});

test("README: the OpenAI Agents example waits for the human's approval in annald, as pasted", async (t) => {
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  const human = root;
  let approved = 0;
  const stop = new AbortController();
  // The human: approves each pending hold as it comes.
  const approving = (async () => {
    while (!stop.signal.aborted) {
      const pending = JSON.parse(new TextDecoder().decode(await human.request("GET", "v1/holds?status=pending")));
      for (const h of pending) {
        await human.answerHold(h.id, "approve", "reviewed");
        approved++;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    const preload = new URL("./fixtures/openai-scripted-model.js", import.meta.url).href;
    assert.equal(await runExample(example("### OpenAI Agents SDK"), ["--import", preload]), "deployed v2\n");
  } finally {
    stop.abort();
    await approving;
  }
  assert.equal(approved, 1);
});
