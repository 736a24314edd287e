import type { AnnalClient, Intent } from "../index.js";

/** How every adapter names and decides a tool call (as `annal hook claude-code` does). */
export interface ToolGateOptions {
  /** Who calls the tools, in each intent's description (default: the adapter's name). */
  by?: string;
  /** The envelope the calls run under (default: the kernel picks). */
  envelope?: string;
  session?: string;
  /** Tools that change nothing: an observe each, no intent nor result. */
  readOnly?: string[] | ((name: string) => boolean);
  /** The target of a tool (default tools/<name>). */
  target?: (name: string) => string;
  /** Told of each held call. */
  onHeld?: (holdId: string, call: ToolCall) => void;
  /** How often a wait for a hold asks the kernel (default 250 ms). */
  pollMs?: number;
}
export interface ToolCall {
  name: string;
  /** The arguments the tool receives; the intent's input is their content id. */
  args: unknown;
  /** The framework's id of the call. */
  callId?: string;
}
export type Decision =
  | { kind: "observe" }
  | { kind: "intent"; intent: Intent }
  | { kind: "held"; intent: Intent; name: string }
  | { kind: "denied"; error: ToolCallDenied };

/** A call the kernel denied or a human refused: the tool did not run. */
export class ToolCallDenied extends Error {
  constructor(tool: string, cause: Error);
  readonly tool: string;
  /** The kernel's AnnalError (stage, gate, reason, denialIndex) or a HoldRefusedError. */
  readonly cause: Error;
}

/** The kernel's gate around an agent framework's tool calls. */
export class ToolGate {
  constructor(client: AnnalClient, options?: ToolGateOptions);
  readonly client: AnnalClient;
  isReadOnly(name: string): boolean;
  target(name: string): string;
  /** Decides a call before it runs (kept by callId for run); without wait, a held call comes back "held". */
  decide(call: ToolCall, options?: { wait?: boolean; signal?: AbortSignal }): Promise<Decision>;
  /** Waits for the human's answer to a held call decided before. */
  answer(callId: string, options?: { signal?: AbortSignal }): Promise<{ approved: true } | { approved: false; message: string }>;
  isHeld(callId: string): boolean;
  /** The decision (made before, or now, waiting for a hold), then fn, then its result; a denial throws ToolCallDenied. */
  run<T>(call: ToolCall, fn: () => Promise<T> | T, options?: { signal?: AbortSignal }): Promise<T>;
}
