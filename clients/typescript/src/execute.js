// The payloads of an execute decided before it runs (rules version 3), as
// Annal's Go code builds them (internal/execute): the intent, logged and
// decided first, and the result that completes it once the command or tool
// call ran; and the content ids (OIDs) of what ran, so that anyone holding
// the bytes can recompute them. testvectors/FORMATS.md ("Event entries")
// states the forms; testvectors/execute.json holds the known answers.
//
// Every OID is "sha256:" and the lower-case hex SHA-256 of RFC 8785 JSON
// (or of raw bytes, for a command's stdin), so the same call gives the same
// OID in any language. Nothing here decides whether an intent is allowed:
// the kernel does.

import { canonicalJSON } from "./canonical.js";
import { bytesOf, oidOf, toHex, utf8 } from "./encoding.js";

export { oidOf };

/** The members of an intent's payload that its description may not set. */
const RESERVED = ["phase", "input_oid", "intent", "output_oid", "artifact_hash", "exit_code", "output_bytes"];

/** The largest output_bytes the kernel takes (2^40). */
const MAX_OUTPUT_BYTES = 2 ** 40;

/**
 * The content id of a JSON value and the size of its RFC 8785 form, as
 * `annal hook claude-code` names a tool's input and what it gave back
 * (undefined counts as null).
 * @param {unknown} value
 * @returns {Promise<{oid: string, size: number}>}
 */
export async function contentID(value) {
  const canon = utf8.encode(canonicalJSON(value === undefined ? null : value));
  return { oid: await oidOf(canon), size: canon.length };
}

/**
 * The input of a command run by `annal exec`: {"argv": [...], "stdin": OID of its stdin}.
 * @param {string[]} argv @param {string} stdinOID
 */
export function canonicalCommand(argv, stdinOID) {
  if (argv.length === 0) throw new Error("no command");
  return canonicalJSON({ argv, stdin: stdinOID });
}

/**
 * The input of an MCP tool call made through the gate:
 * {"arguments": {...}, "server": name, "tool": name}; absent arguments count as {}.
 * @param {string} server @param {string} tool @param {unknown} [args]
 */
export function canonicalToolCall(server, tool, args) {
  return canonicalJSON({ arguments: args ?? {}, server, tool });
}

/**
 * The output of an MCP tool call: "content" (absent: []), "structuredContent"
 * (present and not null) and "isError" (only when true), nothing of "_meta"
 * or the transport.
 * @param {unknown} result
 */
export function canonicalToolResult(result) {
  if (result === null || typeof result !== "object" || Array.isArray(result)) throw new Error("a tool result is a JSON object");
  const r = /** @type {Record<string, unknown>} */ (result);
  /** @type {Record<string, unknown>} */
  const out = { content: r.content ?? [] };
  if (r.structuredContent !== undefined && r.structuredContent !== null) out.structuredContent = r.structuredContent;
  if (r.isError !== undefined) {
    if (typeof r.isError !== "boolean") throw new Error("isError is not a boolean");
    if (r.isError) out.isError = true;
  }
  return canonicalJSON(out);
}

/**
 * The payload of an intent: input names what will run; about describes it
 * in the log (members the kernel's policies can match), and may be absent.
 * @param {string} input @param {Record<string, unknown>} [about]
 * @returns {Record<string, unknown>}
 */
export function intentPayload(input, about = {}) {
  for (const k of RESERVED) {
    if (Object.hasOwn(about, k)) throw new Error(`intent: ${JSON.stringify(k)} is not a description member`);
  }
  return { ...about, phase: "intent", input_oid: input };
}

/**
 * @typedef {object} ExecuteResult what ran, completing an intent
 * @property {number} intent the log index of the intent's action (of the approval, when it was held)
 * @property {string} inputOID
 * @property {string} outputOID
 * @property {string} artifactHash
 * @property {number} [exitCode] an integer of 32 bits (0 when absent)
 * @property {number} [outputBytes] from 0 to 2^40 (0 when absent)
 * @property {Record<string, unknown>} [about] describes the outcome further (e.g. stderr_oid)
 */

/**
 * The payload of a result (§5.6's record with "intent").
 * @param {ExecuteResult} r
 * @returns {Record<string, unknown>}
 */
export function resultPayload(r) {
  const exitCode = r.exitCode ?? 0;
  const outputBytes = r.outputBytes ?? 0;
  if (!Number.isInteger(exitCode) || exitCode < -(2 ** 31) || exitCode >= 2 ** 31) throw new Error(`exit code ${exitCode} is not an integer of 32 bits`);
  if (!Number.isInteger(outputBytes) || outputBytes < 0 || outputBytes > MAX_OUTPUT_BYTES) throw new Error(`output bytes ${outputBytes} is not from 0 to 2^40`);
  if (!Number.isSafeInteger(r.intent) || r.intent < 0) throw new Error(`intent ${r.intent} is not a log index`);
  return {
    ...r.about,
    intent: r.intent,
    input_oid: r.inputOID,
    output_oid: r.outputOID,
    artifact_hash: r.artifactHash,
    exit_code: exitCode,
    output_bytes: outputBytes,
  };
}

/**
 * An execute intent the kernel allowed: what its result names.
 * @typedef {object} Intent
 * @property {number} index the log index the result names: the intent's entry, or the
 *   approving entry when a human approved a held intent
 * @property {string} target
 * @property {string} [envelope]
 * @property {string} [session]
 * @property {string} inputOID
 * @property {string} [holdId] the hold a human answered (or must answer), if the intent was held
 */

/**
 * A hold as the kernel reports it (api.Hold).
 * @typedef {{id: string, status: string, actor: string, target: string, type: string,
 *   answered_by?: string, answered_at?: number, reason?: string, [field: string]: unknown}} HoldStatus
 */

/** An intent a human rejected, or whose hold timed out or failed: what it names must not run. */
export class HoldRefusedError extends Error {
  /** @param {HoldStatus} hold */
  constructor(hold) {
    let msg = `hold ${hold.id} of ${hold.type} on ${hold.target} was ${hold.status}`;
    if (hold.answered_by) msg += " by " + hold.answered_by;
    if (hold.reason) msg += ": " + hold.reason;
    super(msg);
    this.name = "HoldRefusedError";
    this.hold = hold;
  }
}
