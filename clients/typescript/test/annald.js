// Starts a real annald for the client's tests: built from this repository
// with go (or ANNALD names a binary), on a fresh data folder, listening on
// 127.0.0.1 at a port the system picks.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../../../", import.meta.url));

/** @type {string | undefined} */
let built;

/** The annald binary, or undefined when go is not installed. */
function binary(/** @type {string} */ dir) {
  if (process.env.ANNALD) return process.env.ANNALD;
  if (built) return built;
  const out = join(dir, "annald");
  try {
    execFileSync("go", ["build", "-o", out, "./cmd/annald"], { cwd: repo, stdio: ["ignore", "ignore", "pipe"] });
  } catch (e) {
    if (/** @type {any} */ (e).code === "ENOENT") return undefined;
    throw e;
  }
  const binDir = mkdtempSync(join(tmpdir(), "annald-bin-"));
  process.once("exit", () => rmSync(binDir, { recursive: true, force: true }));
  built = join(binDir, "annald");
  renameSync(out, built); // kept for the next annald of this test run; out's folder goes with its data
  return built;
}

/**
 * @param {string[]} [flags] more flags of annald serve
 * @returns {Promise<{url: string, rootCredential: string, verifierKey: string, stop: () => Promise<void>} | undefined>}
 */
export async function startAnnald(flags = []) {
  const dir = mkdtempSync(join(tmpdir(), "annal-ts-"));
  const bin = binary(dir);
  if (!bin) {
    rmSync(dir, { recursive: true, force: true });
    if (process.env.ANNAL_REQUIRE_SERVICES === "1") throw new Error("go is not installed and ANNALD is not set");
    return undefined;
  }
  const data = join(dir, "data");
  const proc = spawn(bin, ["serve", "--data", data, "--listen", "127.0.0.1:0", ...flags], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`annald did not start in 60 s:\n${out}`)), 60_000);
    const read = (/** @type {Buffer} */ chunk) => {
      out += chunk.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on("data", read);
    proc.stderr.on("data", read);
    proc.on("exit", (code) => reject(new Error(`annald exited (${code}):\n${out}`)));
  });
  return {
    url,
    rootCredential: readFileSync(join(data, "root.credential"), "utf8").trim(),
    // The log's key as its operator knows it: from the data folder, not the server's answer.
    verifierKey: readFileSync(join(data, "log.pub"), "utf8").trim(),
    stop: async () => {
      const exited = new Promise((resolve) => proc.once("exit", resolve));
      proc.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
