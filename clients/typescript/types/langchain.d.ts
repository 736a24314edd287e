import type { AnnalClient } from "../index.js";
import type { ToolGate, ToolGateOptions } from "./toolgate.js";
export { ToolCallDenied, ToolGate } from "./toolgate.js";
export type { Decision, ToolCall, ToolGateOptions } from "./toolgate.js";

/** LangChain JS tools put through the kernel (a held call waits for the human inside the tool). */
export class AnnalLangChainTools {
  constructor(client: AnnalClient, options?: ToolGateOptions);
  readonly gate: ToolGate;
  /** The tools, each wrapped: same name, description and schema. */
  wrap<T extends { name: string; description: string; schema?: any; invoke: (input: any, config?: any) => Promise<any> }>(
    tools: T[],
  ): import("@langchain/core/tools").StructuredToolInterface[];
  wrapTool(original: {
    name: string;
    description: string;
    schema?: any;
    invoke: (input: any, config?: any) => Promise<any>;
  }): import("@langchain/core/tools").StructuredToolInterface;
}
