// @annal/client/ai-sdk: the Vercel AI SDK's tools through Annal's kernel.
// Each call of a wrapped tool is decided before it runs (an execute intent,
// or an observe for a read-only tool; named as toolgate.js says) and its
// result recorded after.
//
// A held call becomes the SDK's own tool approval (needsApproval: the
// generation stops with a tool-approval-request); approvalResponses then
// answers each request of a held call with its hold's outcome in annald,
// where a human approves or rejects it, as the tool message the program
// appends before it calls generateText again. With onHold "wait" the call
// waits for the human inside execute instead. A denial is a thrown error,
// which the SDK gives the model as the tool's error; the tool's execute
// never runs. (The SDK asks needsApproval again before it runs an approved
// call, and turns a "no" into a denial: a call approved here answers yes.)
//
// The SDK is not imported: a tool is wrapped by its shape (execute and
// needsApproval), so the adapter follows the installed `ai`. A tool without
// execute (its call answered by the client) passes through unchanged.

import { ToolGate } from "./toolgate.js";

export { ToolCallDenied, ToolGate } from "./toolgate.js";

/**
 * @typedef {object} AIToolShape the part of the SDK's Tool the adapter uses
 * @property {(input: any, options: {toolCallId: string, abortSignal?: AbortSignal}) => any} [execute]
 * @property {boolean | ((input: any, options: {toolCallId: string}) => boolean | PromiseLike<boolean>)} [needsApproval]
 */

/** The tools of an AI SDK call (generateText, streamText, an Agent), put through the kernel. */
export class AnnalAITools {
  /**
   * @param {import("./client.js").AnnalClient} client acting as the agent
   * @param {import("./toolgate.js").ToolGateOptions & {onHold?: "approval" | "wait"}} [options]
   */
  constructor(client, options = {}) {
    this.gate = new ToolGate(client, { by: "ai-sdk", ...options });
    this.onHold = options.onHold ?? "approval";
    /** Calls whose approval request approvalResponses approved: the SDK asks needsApproval again before it runs them. */
    this.approved = new Set();
  }

  /**
   * The tool set, each tool with execute wrapped (named by its key).
   * @template {Record<string, any>} T
   * @param {T} tools
   * @returns {T}
   */
  wrap(tools) {
    /** @type {Record<string, unknown>} */
    const out = {};
    for (const [name, t] of Object.entries(tools)) out[name] = this.wrapTool(name, t);
    return /** @type {T} */ (out);
  }

  /**
   * @template T
   * @param {string} name the tool's key in the tool set
   * @param {T} tool
   * @returns {T}
   */
  wrapTool(name, tool) {
    const t = /** @type {AIToolShape} */ (tool);
    const execute = t?.execute;
    if (typeof execute !== "function") return tool;
    const gate = this.gate;
    const wait = this.onHold === "wait";
    /** @type {AIToolShape} */
    const wrapped = {
      ...t,
      // Called by the SDK before execute: the kernel decides here, so that a
      // hold can be the SDK's approval request.
      needsApproval: async (input, options) => {
        if (this.approved.has(options.toolCallId)) return true;
        const own = typeof t.needsApproval === "function" ? await t.needsApproval(input, options) : t.needsApproval === true;
        const d = await gate.decide({ name, args: input, callId: options.toolCallId }, { wait });
        return d.kind === "held" || own;
      },
      execute: (input, options) => {
        this.approved.delete(options.toolCallId);
        return gate.run({ name, args: input, callId: options.toolCallId }, () => execute(input, options), { signal: options.abortSignal });
      },
    };
    return /** @type {T} */ (/** @type {unknown} */ (wrapped));
  }

  /**
   * The answers to a generation's approval requests of held calls of these
   * tools, each its hold's outcome in annald (waiting for the human), as the
   * tool message to append to the messages (after result.response.messages)
   * for the next generateText; undefined when none of the requests is
   * theirs. Requests of other tools are left to the program.
   * @param {{content: ReadonlyArray<any>}} result
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<{role: "tool", content: {type: "tool-approval-response", approvalId: string, approved: boolean, reason?: string}[]} | undefined>}
   */
  async approvalResponses(result, options = {}) {
    /** @type {{type: "tool-approval-response", approvalId: string, approved: boolean, reason?: string}[]} */
    const content = [];
    for (const part of result.content) {
      if (part?.type !== "tool-approval-request") continue;
      const callId = part.toolCall?.toolCallId;
      if (typeof callId !== "string" || !this.gate.isHeld(callId)) continue;
      const a = await this.gate.answer(callId, options);
      if (a.approved) this.approved.add(callId);
      content.push(
        a.approved
          ? { type: "tool-approval-response", approvalId: part.approvalId, approved: true }
          : { type: "tool-approval-response", approvalId: part.approvalId, approved: false, reason: a.message },
      );
    }
    return content.length > 0 ? { role: "tool", content } : undefined;
  }
}
