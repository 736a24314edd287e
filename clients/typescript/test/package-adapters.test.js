// The adapters as users import them (@annal/client/<framework>): each
// subpath's declarations in types/ name exactly its runtime exports, and
// the package's main entry loads no framework.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as openaiAgents from "@annal/client/openai-agents";
import * as aiSdk from "@annal/client/ai-sdk";
import * as langchain from "@annal/client/langchain";

/** The names a declaration file exports, its re-exports included (types only excepted). @param {string} file */
function declared(file) {
  const dts = readFileSync(new URL(`../types/${file}`, import.meta.url), "utf8");
  const names = [...dts.matchAll(/^export (?:declare )?(?:function|class|const) (\w+)/gm)].map((m) => m[1]);
  for (const m of dts.matchAll(/^export \{([^}]*)\} from "\.\/(\w+)\.js";/gm)) names.push(...m[1].split(",").map((s) => s.trim()).filter(Boolean));
  return [...new Set(names)].sort();
}

test("package: each adapter's declarations name exactly its runtime exports", () => {
  assert.deepEqual(declared("openai-agents.d.ts"), Object.keys(openaiAgents).sort());
  assert.deepEqual(declared("ai-sdk.d.ts"), Object.keys(aiSdk).sort());
  assert.deepEqual(declared("langchain.d.ts"), Object.keys(langchain).sort());
  assert.ok(Object.keys(openaiAgents).includes("AnnalAgentTools"));
});

test("package: the main entry loads no framework (they are optional peer dependencies)", () => {
  const main = readFileSync(new URL("../src/index.js", import.meta.url), "utf8");
  assert.doesNotMatch(main, /openai-agents|ai-sdk|langchain|@openai|from "ai"/);
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  for (const peer of ["@openai/agents", "ai", "@langchain/core"]) {
    assert.equal(pkg.peerDependenciesMeta[peer]?.optional, true, peer);
    assert.match(pkg.devDependencies[peer], /^\d+\.\d+\.\d+$/, `${peer} is not pinned exactly`);
  }
});
