// The kernel's gate for an agent framework's tool calls, which every
// adapter (openai-agents.js, ai-sdk.js, langchain.js) puts around a tool.
// It names a call as `annal hook claude-code` does (cmd/annal/hook.go), so
// that every integration logs tools the same way:
//
//   - the target is tools/<name> (options.target changes it);
//   - a read-only tool is an observe of its target, decided before it runs,
//     with no result;
//   - any other call is an execute intent whose input is the content id of
//     the tool's arguments (RFC 8785), described by {tool, tool_use_id, by},
//     and, once the tool ran, a result whose output is the content id of
//     what it returned (its artifact hash the same), exit code 1 when it
//     threw.
//
// A denial (or a hold a human rejected) is a ToolCallDenied: the adapter
// gives its message to the model as the tool's error, and the tool never
// runs. An answer to ask again (429, 503) after the client's retries, a
// kernel's failure (5xx) or a lost answer fails the call: nothing was
// refused. A call whose result cannot be recorded fails, its intent left
// open.

import { AnnalError } from "./client.js";
import { HoldRefusedError, contentID } from "./execute.js";

/**
 * @typedef {object} ToolGateOptions
 * @property {string} [by] who calls the tools, in each intent's description (the adapter's name)
 * @property {string} [envelope] the envelope the calls run under (default: the kernel picks)
 * @property {string} [session]
 * @property {string[] | ((name: string) => boolean)} [readOnly] tools that change nothing: an observe each
 * @property {(name: string) => string} [target] the target of a tool (default tools/<name>)
 * @property {(holdId: string, call: ToolCall) => void} [onHeld] told of each held call
 * @property {number} [pollMs] how often a wait for a hold asks the kernel (default 250 ms)
 */

/**
 * @typedef {object} ToolCall
 * @property {string} name
 * @property {unknown} args the arguments the tool receives
 * @property {string} [callId] the framework's id of the call
 */

/**
 * How the kernel decided a call before it ran.
 * @typedef {{kind: "observe"} | {kind: "intent", intent: import("./execute.js").Intent}
 *   | {kind: "held", intent: import("./execute.js").Intent, name: string} | {kind: "denied", error: ToolCallDenied}} Decision
 */

/** A call the kernel denied or a human refused: the tool did not run. */
export class ToolCallDenied extends Error {
  /** @param {string} tool @param {Error} cause */
  constructor(tool, cause) {
    super(`annal refused this call of ${tool}: ${cause.message}`, { cause });
    this.name = "ToolCallDenied";
    this.tool = tool;
    /** The kernel's AnnalError (stage, gate, reason, denialIndex) or a HoldRefusedError. */
    this.cause = cause;
  }
}

export class ToolGate {
  /**
   * @param {import("./client.js").AnnalClient} client acting as the agent
   * @param {ToolGateOptions} [options]
   */
  constructor(client, options = {}) {
    this.client = client;
    this.options = options;
    /** Decisions made before the framework runs the call (held calls among them), by call id. @type {Map<string, Decision>} */
    this.decided = new Map();
  }

  /** @param {string} name */
  isReadOnly(name) {
    const r = this.options.readOnly;
    return typeof r === "function" ? r(name) : (r ?? []).includes(name);
  }

  /** @param {string} name */
  target(name) {
    return this.options.target ? this.options.target(name) : `tools/${name}`;
  }

  /**
   * Decides a call before it runs. With wait, a held call waits for its
   * human's answer; without, it comes back "held" (the adapter turns it into
   * its framework's approval). A decision is kept by callId for run(), and
   * a call already decided (a framework may ask twice) is not decided again.
   * @param {ToolCall} call
   * @param {{wait?: boolean, signal?: AbortSignal}} [options]
   * @returns {Promise<Decision>}
   */
  async decide(call, options = {}) {
    const prior = call.callId === undefined ? undefined : this.decided.get(call.callId);
    if (prior) return prior;
    const d = await this.#decide(call, options);
    if (call.callId !== undefined) this.decided.set(call.callId, d);
    return d;
  }

  /** @param {ToolCall} call @param {{wait?: boolean, signal?: AbortSignal}} options @returns {Promise<Decision>} */
  async #decide(call, { wait = true, signal }) {
    const { envelope, session } = this.options;
    const target = this.target(call.name);
    try {
      if (this.isReadOnly(call.name)) {
        await this.client.submit({ type: "observe", target, envelope, session }, { signal });
        return { kind: "observe" };
      }
      /** @type {Record<string, unknown>} */
      const about = { tool: call.name, by: this.options.by ?? "annal-client" };
      if (call.callId !== undefined) about.tool_use_id = call.callId;
      const input = (await contentID(call.args)).oid;
      const intent = await this.client.submitIntent({ target, envelope, session, input, about, signal });
      if (!intent.holdId) return { kind: "intent", intent };
      this.options.onHeld?.(intent.holdId, call);
      if (!wait) return { kind: "held", intent, name: call.name };
      return { kind: "intent", intent: await this.client.settleIntent(intent, { signal, pollMs: this.options.pollMs }) };
    } catch (e) {
      // A refusal (4xx) is the model's to see; a kernel that asks to be
      // asked again (429, 503: the client's retry policy gave up), that
      // failed (5xx) or whose answer was lost decided nothing: the call fails.
      if (e instanceof HoldRefusedError || (e instanceof AnnalError && e.status < 500 && !e.outcomeUnknown && !e.shouldRetry)) {
        return { kind: "denied", error: new ToolCallDenied(call.name, e) };
      }
      throw e;
    }
  }

  /**
   * Waits for the human's answer to a held call decided before (by
   * callId): approved, the call may run; refused, the message the model
   * is to see.
   * @param {string} callId
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<{approved: true} | {approved: false, message: string}>}
   */
  async answer(callId, options = {}) {
    const d = this.decided.get(callId);
    if (d?.kind !== "held") throw new Error(`annal: call ${callId} is not held`);
    try {
      const intent = await this.client.settleIntent(d.intent, { signal: options.signal, pollMs: this.options.pollMs });
      this.decided.set(callId, { kind: "intent", intent });
      return { approved: true };
    } catch (e) {
      if (!(e instanceof HoldRefusedError)) throw e;
      this.decided.delete(callId);
      return { approved: false, message: new ToolCallDenied(d.name, e).message };
    }
  }

  /** Whether callId is a held call this gate waits on. @param {string} callId */
  isHeld(callId) {
    return this.decided.get(callId)?.kind === "held";
  }

  /**
   * Runs a call through the kernel: its decision (made before by decide,
   * or now, waiting for a hold), then fn, then its result. A denial is a
   * ToolCallDenied and fn is never called.
   * @template T
   * @param {ToolCall} call
   * @param {() => Promise<T> | T} fn runs the tool
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<T>}
   */
  async run(call, fn, options = {}) {
    let d = call.callId === undefined ? undefined : this.decided.get(call.callId);
    if (call.callId !== undefined) this.decided.delete(call.callId);
    if (d?.kind === "held") {
      try {
        d = { kind: "intent", intent: await this.client.settleIntent(d.intent, { signal: options.signal, pollMs: this.options.pollMs }) };
      } catch (e) {
        if (!(e instanceof HoldRefusedError)) throw e;
        d = { kind: "denied", error: new ToolCallDenied(call.name, e) };
      }
    }
    d ??= await this.#decide(call, { signal: options.signal });
    if (d.kind === "denied") throw d.error;
    if (d.kind === "observe") return fn();
    const intent = d.intent;
    /** @type {T} */
    let out;
    try {
      out = await fn();
    } catch (e) {
      await this.#record(intent, { error: /** @type {Error} */ (e)?.message ?? String(e) }, 1, options.signal);
      throw e;
    }
    await this.#record(intent, out, 0, options.signal);
    return out;
  }

  /**
   * @param {import("./execute.js").Intent} intent @param {unknown} output @param {number} exitCode
   * @param {AbortSignal} [signal]
   */
  async #record(intent, output, exitCode, signal) {
    let id;
    try {
      id = await contentID(output);
    } catch {
      id = await contentID(String(output)); // not JSON (a class, a bigint): its text
    }
    try {
      await this.client.recordResult(intent, { outputOID: id.oid, outputBytes: id.size, exitCode }, { signal });
    } catch (e) {
      throw new Error(`annal: the result of the call on ${intent.target} could not be recorded (its intent stays open): ${/** @type {Error} */ (e).message}`, { cause: e });
    }
  }
}
