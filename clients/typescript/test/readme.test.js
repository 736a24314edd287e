// The README's example runs as pasted against a real annald, as an agent.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";
import { AnnalClient } from "@annal/client";
import { startAnnald } from "./annald.js";

test("README: the example submits and verifies offline as pasted", async (t) => {
  const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const m = /```js\n([\s\S]*?)```/.exec(readme);
  assert.ok(m, "README has no js example");
  assert.ok(m[1].trim().split("\n").length <= 5, "the example is longer than five lines");
  const repoReadme = readFileSync(new URL("../../../README.md", import.meta.url), "utf8");
  assert.ok(repoReadme.includes("```js\n" + m[1] + "```"), "the repository's README does not show the same example");
  const annald = await startAnnald();
  if (!annald) return t.skip("go is not installed (set ANNALD or install go)");
  // Inside the package, so that "@annal/client" resolves to it.
  const file = new URL("../.readme-example.mjs", import.meta.url);
  try {
    const root = new AnnalClient(annald.url, { credential: annald.rootCredential });
    const grants = [{ pattern: "workspace/**", actions: ["create"] }];
    const a = await root.createAgent({ name: "readme", purpose: "runs the README", energy: 100, trust: 0.8, grants });
    await root.issueEnvelope({ holder: a.id, budget: 50, grants });
    writeFileSync(file, m[1]);
    const { stdout } = await promisify(execFile)(process.execPath, [file.pathname], {
      env: { ...process.env, ANNAL_URL: annald.url, ANNAL_CREDENTIAL: a.credential, ANNAL_VERIFIER_KEY: annald.verifierKey },
    });
    assert.match(stdout, /^entry \d+ of \d+ is in annal\.local\/[0-9a-f]+\n$/);
  } finally {
    rmSync(file, { force: true });
    await annald.stop();
  }
});
