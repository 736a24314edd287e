// @annal/client/openai-agents: the OpenAI Agents SDK's function tools
// through Annal's kernel. Each call of a wrapped tool is decided before it
// runs (an execute intent, or an observe for a read-only tool; named as
// toolgate.js says) and its result recorded after.
//
// A held call becomes the SDK's own human-approval interruption (the run
// ends with result.interruptions, as for a tool with needsApproval);
// answerInterruptions then answers each with the outcome of its hold in
// annald, where a human approves or rejects it, and the program resumes the
// run with result.state. With onHold "wait" the call waits for the human
// instead, inside the run. A denial (or a rejection) is the tool's output
// the model sees; the tool's function never runs.
//
// The SDK itself is not imported: a tool is wrapped by its shape
// (FunctionTool's needsApproval and invoke), so the adapter follows the
// installed @openai/agents. Hosted and other non-function tools pass
// through unchanged: their calls run at the provider, out of the kernel's reach.

import { ToolCallDenied, ToolGate } from "./toolgate.js";

export { ToolCallDenied, ToolGate } from "./toolgate.js";

/**
 * @typedef {object} FunctionToolShape the part of the SDK's FunctionTool the adapter uses
 * @property {"function"} type
 * @property {string} name
 * @property {(runContext: any, input: any, callId?: string) => Promise<boolean>} needsApproval
 * @property {(runContext: any, input: string, details?: {toolCall?: {callId: string, arguments: string}, signal?: AbortSignal}) => Promise<unknown>} invoke
 */

/** Function tools of an OpenAI Agents SDK agent, put through the kernel. */
export class AnnalAgentTools {
  /**
   * @param {import("./client.js").AnnalClient} client acting as the agent
   * @param {import("./toolgate.js").ToolGateOptions & {onHold?: "interrupt" | "wait"}} [options]
   */
  constructor(client, options = {}) {
    this.gate = new ToolGate(client, { by: "openai-agents", ...options });
    this.onHold = options.onHold ?? "interrupt";
  }

  /**
   * The tools, each function tool wrapped (others as they are).
   * @template T
   * @param {T[]} tools
   * @returns {T[]}
   */
  wrap(tools) {
    return tools.map((t) => this.wrapTool(t));
  }

  /**
   * @template T
   * @param {T} tool
   * @returns {T}
   */
  wrapTool(tool) {
    const t = /** @type {FunctionToolShape} */ (/** @type {unknown} */ (tool));
    if (t?.type !== "function" || typeof t.invoke !== "function") return tool;
    const gate = this.gate;
    const wait = this.onHold === "wait";
    /** @type {FunctionToolShape} */
    const wrapped = {
      ...t,
      // Called by the runner before invoke, with the parsed arguments: the
      // kernel decides here, so that a hold can be the SDK's interruption.
      needsApproval: async (runContext, input, callId) => {
        const own = await t.needsApproval(runContext, input, callId);
        const d = await gate.decide({ name: t.name, args: input, callId }, { wait });
        return d.kind === "held" || own;
      },
      invoke: async (runContext, input, details) => {
        const callId = details?.toolCall?.callId;
        try {
          return await gate.run({ name: t.name, args: parseArguments(input), callId }, () => t.invoke(runContext, input, details), {
            signal: details?.signal,
          });
        } catch (e) {
          if (e instanceof ToolCallDenied) return e.message; // the tool's error, as the model sees it
          throw e;
        }
      },
    };
    return /** @type {T} */ (/** @type {unknown} */ (wrapped));
  }

  /**
   * Answers the run's interruptions that are held calls of these tools,
   * each by its hold's outcome in annald (waiting for the human): approved,
   * state.approve; rejected, timed out or failed, state.reject with the
   * kernel's words for the model. Other interruptions are left to the
   * program. Resume the run with result.state afterwards.
   * @param {{interruptions?: any[], state: {approve: (item: any) => void, reject: (item: any, options?: {message?: string}) => void}}} result
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<number>} how many interruptions it answered
   */
  async answerInterruptions(result, options = {}) {
    let n = 0;
    for (const item of result.interruptions ?? []) {
      const callId = item?.rawItem?.callId;
      if (typeof callId !== "string" || !this.gate.isHeld(callId)) continue;
      const a = await this.gate.answer(callId, options);
      if (a.approved) result.state.approve(item);
      else result.state.reject(item, { message: a.message });
      n++;
    }
    return n;
  }
}

/** The arguments a function tool receives, parsed from the model's JSON (kept as text when not JSON). @param {string} input */
function parseArguments(input) {
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}
