// The package as users import it: every runtime export is declared in
// index.d.ts and every declaration exists (tsc checks the tests against
// index.d.ts through the same import).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as client from "@annal/client";

test("package: index.d.ts declares exactly the runtime exports", () => {
  const dts = readFileSync(new URL("../index.d.ts", import.meta.url), "utf8");
  const declared = [...dts.matchAll(/^export (?:declare )?(?:async )?(?:function|class|const) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual([...new Set(declared)].sort(), Object.keys(client).sort());
});
