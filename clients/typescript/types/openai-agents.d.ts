import type { AnnalClient } from "../index.js";
import type { ToolGate, ToolGateOptions } from "./toolgate.js";
export { ToolCallDenied, ToolGate } from "./toolgate.js";
export type { Decision, ToolCall, ToolGateOptions } from "./toolgate.js";

/** Function tools of an OpenAI Agents SDK agent, put through the kernel. */
export class AnnalAgentTools {
  /** onHold: "interrupt" (the SDK's approval interruption, default) or "wait" (inside the run). */
  constructor(client: AnnalClient, options?: ToolGateOptions & { onHold?: "interrupt" | "wait" });
  readonly gate: ToolGate;
  /** The tools, each function tool wrapped (hosted tools as they are). */
  wrap<T>(tools: T[]): T[];
  wrapTool<T>(tool: T): T;
  /**
   * Answers the run's interruptions that are held calls of these tools by their holds' outcomes in
   * annald (waiting for the human); resume the run with result.state afterwards. Returns how many.
   */
  answerInterruptions(
    result: {
      interruptions?: any[];
      state: { approve: (item: any) => void; reject: (item: any, options?: { message?: string }) => void };
    },
    options?: { signal?: AbortSignal },
  ): Promise<number>;
}
