// @annal/client/langchain: LangChain JS tools through Annal's kernel. Each
// call of a wrapped tool is decided before it runs (an execute intent, or an
// observe for a read-only tool; named as toolgate.js says) and its result
// recorded after.
//
// @langchain/core has no human-approval interruption of its own (LangGraph's
// interrupt is another package), so a held call waits for the human's
// answer in annald inside the tool. A denial, or a rejection, is the tool
// call's ToolMessage with status "error" and the kernel's words, which the
// model sees (a thrown ToolCallDenied when the tool is invoked with bare
// arguments, not a tool call); the tool's function never runs.

import { ToolMessage } from "@langchain/core/messages";
import { tool as makeTool } from "@langchain/core/tools";
import { ToolCallDenied, ToolGate } from "./toolgate.js";

export { ToolCallDenied, ToolGate } from "./toolgate.js";

/**
 * @typedef {object} LangChainToolShape the part of a LangChain tool the adapter uses
 * @property {string} name
 * @property {string} description
 * @property {any} [schema]
 * @property {(input: any, config?: any) => Promise<any>} invoke
 */

/** LangChain tools put through the kernel. */
export class AnnalLangChainTools {
  /**
   * @param {import("./client.js").AnnalClient} client acting as the agent
   * @param {import("./toolgate.js").ToolGateOptions} [options]
   */
  constructor(client, options = {}) {
    this.gate = new ToolGate(client, { by: "langchain", ...options });
  }

  /**
   * The tools, each wrapped.
   * @template {LangChainToolShape} T
   * @param {T[]} tools
   */
  wrap(tools) {
    return tools.map((t) => this.wrapTool(t));
  }

  /**
   * A tool of the same name, description and schema whose calls go through the kernel.
   * @param {LangChainToolShape} original
   */
  wrapTool(original) {
    const gate = this.gate;
    const name = original.name;
    return makeTool(
      async (input, config) => {
        const { toolCall, ...rest } = /** @type {{toolCall?: {id?: string}}} */ (config ?? {});
        try {
          // Invoked without the tool call, the original gives its content, which this tool wraps.
          return await gate.run({ name, args: input, callId: toolCall?.id }, () => original.invoke(input, rest), { signal: /** @type {any} */ (rest).signal });
        } catch (e) {
          if (!(e instanceof ToolCallDenied) || !toolCall?.id) throw e;
          return new ToolMessage({ content: e.message, tool_call_id: toolCall.id, name, status: "error" });
        }
      },
      { name, description: original.description, schema: original.schema },
    );
  }
}
