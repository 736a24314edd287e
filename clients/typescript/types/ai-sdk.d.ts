import type { AnnalClient } from "../index.js";
import type { ToolGate, ToolGateOptions } from "./toolgate.js";
export { ToolCallDenied, ToolGate } from "./toolgate.js";
export type { Decision, ToolCall, ToolGateOptions } from "./toolgate.js";

/** The tools of an AI SDK call (generateText, streamText, an Agent), put through the kernel. */
export class AnnalAITools {
  /** onHold: "approval" (the SDK's tool approval request, default) or "wait" (inside execute). */
  constructor(client: AnnalClient, options?: ToolGateOptions & { onHold?: "approval" | "wait" });
  readonly gate: ToolGate;
  /** The tool set, each tool with execute wrapped (named by its key). */
  wrap<T extends Record<string, any>>(tools: T): T;
  wrapTool<T>(name: string, tool: T): T;
  /**
   * The answers to the generation's approval requests of held calls, each its hold's outcome in annald
   * (waiting for the human): the tool message to append after result.response.messages; undefined if none.
   */
  approvalResponses(
    result: { content: ReadonlyArray<any> },
    options?: { signal?: AbortSignal },
  ): Promise<
    | { role: "tool"; content: { type: "tool-approval-response"; approvalId: string; approved: boolean; reason?: string }[] }
    | undefined
  >;
}
