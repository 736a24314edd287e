// Differential test against Annal's Go verifier: randomly changed
// tlog-proofs of tlogproofs.json (the seed corpus) go through this package
// and through annal-verify, built from this repository; both must accept or
// refuse each, a refusal with the same message. Skips without go unless
// ANNAL_REQUIRE_SERVICES=1.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { verifyProof } from "@annal/client";
import { deriveKey, vectors } from "./helpers.js";
import { mutate, rng } from "./mutate.js";

const repo = fileURLToPath(new URL("../../../", import.meta.url));

test("differential: annal-verify and verifyProof agree on 300 changed proofs, message for message", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "annal-ts-diff-"));
  try {
    const bin = join(dir, "annal-verify");
    try {
      execFileSync("go", ["build", "-o", bin, "./cmd/annal-verify"], { cwd: repo, stdio: ["ignore", "ignore", "pipe"] });
    } catch (e) {
      if (/** @type {any} */ (e).code !== "ENOENT") throw e;
      if (process.env.ANNAL_REQUIRE_SERVICES === "1") throw new Error("go is not installed");
      return t.skip("go is not installed");
    }
    const f = vectors("tlogproofs.json");
    const log = await deriveKey(f.keys.find((/** @type {any} */ k) => k.label === "log"));
    const r = rng(7);
    let refused = 0;
    for (let i = 0; i < 300; i++) {
      const v = f.inclusion[i % f.inclusion.length];
      const bad = mutate(v.proof, r);
      const [entryFile, proofFile] = [join(dir, "entry"), join(dir, "proof")];
      writeFileSync(entryFile, f.entries[v.index]);
      writeFileSync(proofFile, bad);
      let ours = "accepted";
      try {
        await verifyProof(f.entries[v.index], bad, log.verifierKey);
      } catch (e) {
        ours = /** @type {Error} */ (e).message;
        refused++;
      }
      let theirs = "accepted";
      try {
        await promisify(execFile)(bin, ["proof", "--key", log.verifierKey, "--entry", entryFile, proofFile]);
      } catch (e) {
        theirs = String(/** @type {any} */ (e).stderr).trim().replace(/^annal-verify: FAILED /, "");
      }
      assert.equal(ours, theirs, `proof ${JSON.stringify(bad)}`);
    }
    assert.ok(refused > 250, `only ${refused} of 300 refused`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
