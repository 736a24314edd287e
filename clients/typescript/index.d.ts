// Types of @annal/client (src/index.js).

/** An offline check failed: check names which, reason says why, in the words of Annal's Go verifier. */
export class VerificationError extends Error {
  constructor(check: string, reason: string);
  /** "verifier key", "proof format", "checkpoint signature", "index", "entry", "inclusion", "consistency" or "policy". */
  readonly check: string;
  readonly reason: string;
}

export function encodeBase64(bytes: Uint8Array): string;
/** Standard base64 with padding; strict (the default) also refuses non-zero padding bits. */
export function decodeBase64(s: string, strict?: boolean): Uint8Array;
export function toHex(bytes: Uint8Array): string;
export function fromHex(s: string): Uint8Array;
/** An unsigned 64-bit canonical decimal (no sign, no leading zero). */
export function parseDecimal(s: string): bigint;

/** The RFC 8785 canonical JSON encoding of a value. */
export function canonicalJSON(value: unknown): string;

/** The largest log entry, in bytes. */
export const MAX_ENTRY_SIZE: 65535;
/**
 * Reads an entry's JSON as Annal's reader does at the JSON level (FORMATS.md, "What Annal accepts
 * in JSON"): UTF-8, no duplicate member, no lone surrogate, no number canonical JSON would write as
 * another value, at most 34 levels deep, in RFC 8785 canonical form. Not an event parser.
 */
export function readEntryJSON(input: string | Uint8Array): unknown;

export class MalformedNoteError extends Error {}
export class UnverifiedNoteError extends Error {}
export class InvalidSignatureError extends Error {
  readonly keyName: string;
  readonly keyHash: number;
}

export interface NoteVerifier {
  readonly name: string;
  readonly keyHash: number;
  /** The key type byte: 0x01 Ed25519, 0x04 cosignature/v1 (Ed25519), 0x06 ML-DSA-44 (cosignature). */
  readonly type: number;
  verify(text: Uint8Array, sig: Uint8Array): Promise<boolean>;
}
export interface NoteSignature {
  name: string;
  keyHash: number;
  base64: string;
}
export interface Note {
  /** The signed text, ending in a newline. */
  text: string;
  /** Signatures by known keys, all verified. */
  sigs: NoteSignature[];
  /** Signatures by keys the reader does not know. */
  unverifiedSigs: NoteSignature[];
}
/** The 32-bit key id: SHA-256(name || "\n" || type || key)[:4], big-endian. */
export function keyHash(name: string, typedKey: Uint8Array): Promise<number>;
/** A verifier key <name>+<8 hex id>+<base64 type||key>: Ed25519 (0x01), cosignature/v1 (0x04) or ML-DSA-44 (0x06). */
export function newVerifier(vkey: string): Promise<NoteVerifier>;
/** Opens a C2SP signed note, verifying every signature by a known key; as x/mod's note.Open. */
export function openNote(msg: string | Uint8Array, known: NoteVerifier[]): Promise<Note>;

export interface Checkpoint {
  origin: string;
  size: bigint;
  /** 32 bytes. */
  rootHash: Uint8Array;
  extensions: string[];
}
export interface SignedCheckpoint extends Checkpoint {
  note: Note;
  raw: Uint8Array;
}
export const MAX_CHECKPOINT_SIZE: number;
export function marshalCheckpoint(c: Checkpoint): string;
export function parseCheckpointBody(text: string): Checkpoint;
/** A SHA-256 hash in strict base64. */
export function parseHash(s: string): Uint8Array;
/** Opens a checkpoint signed by logKey (others' signatures, e.g. witnesses', are verified too). */
export function openCheckpoint(
  signed: string | Uint8Array,
  logKey: NoteVerifier,
  others?: NoteVerifier[],
): Promise<SignedCheckpoint>;

export class RootMismatchError extends Error {
  readonly calculated: Uint8Array;
  readonly expected: Uint8Array;
}
/** SHA-256(0x00 || entry). */
export function leafHash(entry: Uint8Array): Promise<Uint8Array>;
/** SHA-256(0x01 || left || right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Promise<Uint8Array>;
export function verifyInclusion(
  index: bigint,
  size: bigint,
  leaf: Uint8Array,
  proof: Uint8Array[],
  root: Uint8Array,
): Promise<void>;
export function verifyConsistency(
  size1: bigint,
  size2: bigint,
  proof: Uint8Array[],
  root1: Uint8Array,
  root2: Uint8Array,
): Promise<void>;

export const TLOG_PROOF_HEADER: "c2sp.org/tlog-proof@v1";
export interface TLogProof {
  extra?: Uint8Array;
  index: bigint;
  hashes: Uint8Array[];
  checkpoint: Uint8Array;
}
export function parseTLogProof(data: string | Uint8Array): TLogProof;
export function marshalTLogProof(p: TLogProof): string;
/** A consistency proof: one base64 hash per line. */
export function parseHashes(data: string | Uint8Array): Uint8Array[];
/** A log's verifier key; a VerificationError of check "verifier key" when it is not one. */
export function logVerifier(vkey: string): Promise<NoteVerifier>;

export interface ProofResult {
  origin: string;
  size: bigint;
  rootHash: Uint8Array;
  index: bigint;
  leafHash: Uint8Array;
  checkpoint: SignedCheckpoint;
}
/** Verifies offline that entry is in the log of vkey, as its c2sp.org/tlog-proof says. */
export function verifyProof(entry: string | Uint8Array, tlogProof: string | Uint8Array, vkey: string): Promise<ProofResult>;
/** Verifies offline that the newer checkpoint's tree extends the older one's. */
export function verifyConsistencyProof(
  oldCheckpoint: string | Uint8Array,
  newCheckpoint: string | Uint8Array,
  proof: string | Uint8Array,
  vkey: string,
): Promise<{ origin: string; old: SignedCheckpoint; new: SignedCheckpoint }>;

export interface PolicyResult {
  checkpoint: SignedCheckpoint;
  logKey: string;
  /** Witness names with a valid cosignature, sorted. */
  cosigners: string[];
}
/** A witness policy: log, witness, group and quorum lines. */
export class Policy {
  readonly logs: NoteVerifier[];
  readonly logKeys: string[];
  readonly witnesses: Map<string, NoteVerifier>;
  readonly groups: Map<string, { k: number; members: string[] }>;
  readonly quorum: string;
  openCheckpoint(signed: string | Uint8Array): Promise<PolicyResult>;
}
export function parsePolicy(text: string): Promise<Policy>;
/** A witness's key: cosignature/v1 (type 0x04, Ed25519) or ML-DSA-44 (0x06). */
export function witnessVerifier(vkey: string): Promise<NoteVerifier>;
/** verifyProof with the log key from the policy, the proof's checkpoint meeting its quorum. */
export function verifyProofWithPolicy(
  entry: string | Uint8Array,
  tlogProof: string | Uint8Array,
  policy: Policy,
): Promise<{ proof: ProofResult; policy: PolicyResult }>;

/** What the client reads from any answer but a blob's or a file's. */
export const MAX_RESPONSE_BODY: number;
/** What the client reads of a blob or a file of the agent file system. */
export const MAX_BLOB_BODY: number;
export interface RetryPolicy {
  /** Sends in all (0 or 1: no retry). */
  attempts: number;
  /** The first wait, doubled each time (the answer's Retry-After when longer). */
  firstMs: number;
  /** The longest wait (0: no bound). */
  maxMs: number;
}
/** The annal CLI's retry policy: 6 sends, from 250 ms, at most 5 s. */
export const DEFAULT_RETRY: Readonly<RetryPolicy>;

/** An error answer from the kernel (api.Error in api/api.go). */
export class AnnalError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The kernel's explanation. */
  readonly kernelMessage: string;
  /** The pipeline stage that denied the action, if one did. */
  readonly stage?: string;
  /** The check within the stage. */
  readonly gate?: string;
  /** The spec's name of the refusal, where it has one (e.g. "insufficient_trust"). */
  readonly reason?: string;
  /** Where the refusal was recorded in the log, if it was. */
  readonly denialIndex?: number;
  /** The signal the kernel sent the agent for this refusal ("SIGKILL"). */
  readonly signal?: string;
  readonly traceId?: string;
  /** The write failed after the entry reached the log: it may be logged; never sent again. */
  readonly outcomeUnknown: boolean;
  readonly retryable: boolean;
  /** The kernel takes no writes until an operator acts. */
  readonly stopped: boolean;
  readonly retryAfterMs?: number;
  /** Whether the kernel did nothing and asks to be asked again (429, 503, retryable; never outcome_unknown). */
  readonly shouldRetry: boolean;
}

export interface Grant {
  pattern: string;
  actions: string[];
}
export interface ActionRequest {
  type: "observe" | "create" | "mutate" | "execute";
  target: string;
  payload?: unknown;
  payload_hash?: string;
  envelope?: string;
  session?: string;
  action_id?: string;
  /** Keep the payload out of the log, sealed under subject's key (the actor's when absent). */
  seal?: boolean;
  subject?: string;
  /** Standard base64 of 32 bytes; a signing client draws it. */
  salt?: string;
}
export interface Receipt {
  status: "committed" | "held";
  hold_id?: string;
  event_id: string;
  index: number;
  leaf_hash: string;
  time: string;
  actor: string;
  type: string;
  target: string;
  envelope?: string;
  cost: number;
  reason?: string;
  checkpoint?: string;
  proof?: string;
  proof_error?: string;
  trace_id?: string;
}
export interface Hold {
  id: string;
  status: "pending" | "approved" | "rejected" | "timed_out" | "failed" | string;
  actor: string;
  target: string;
  type: string;
  [field: string]: unknown;
}

/** An execute intent about to be submitted (client.submitIntent, decideIntent). */
export interface IntentRequest {
  target: string;
  envelope?: string;
  session?: string;
  /** The content id of what will run ("sha256:" and 64 hex digits). */
  input: string;
  /** What the log says of it (members policies can match); not phase, input_oid nor a result's members. */
  about?: Record<string, unknown>;
  signal?: AbortSignal;
}
/** An execute intent the kernel allowed (or held: holdId): what its result names. */
export interface Intent {
  /** The log index a result names: the intent's entry, or the approving entry of a held one. */
  index: number;
  target: string;
  envelope?: string;
  session?: string;
  inputOID: string;
  holdId?: string;
}
/** The known form of an execute's result (testvectors/execute.json). */
export interface ExecuteResult {
  intent: number;
  inputOID: string;
  outputOID: string;
  artifactHash: string;
  exitCode?: number;
  outputBytes?: number;
  about?: Record<string, unknown>;
}
/** "sha256:" and the lower-case hex SHA-256 of bytes. */
export function oidOf(bytes: Uint8Array | string): Promise<string>;
/** The content id of a JSON value's RFC 8785 form and its size, as annal hook names a tool's input and output. */
export function contentID(value: unknown): Promise<{ oid: string; size: number }>;
/** RFC 8785 {"argv", "stdin"}: the input of an annal exec command. */
export function canonicalCommand(argv: string[], stdinOID: string): string;
/** RFC 8785 {"arguments", "server", "tool"}: the input of an MCP tool call through the gate. */
export function canonicalToolCall(server: string, tool: string, args?: unknown): string;
/** RFC 8785 of an MCP tool result's content, structuredContent and isError (true only). */
export function canonicalToolResult(result: unknown): string;
/** The payload of an intent: {...about, phase: "intent", input_oid}. */
export function intentPayload(input: string, about?: Record<string, unknown>): Record<string, unknown>;
/** The payload of a result: {...about, intent, input_oid, output_oid, artifact_hash, exit_code, output_bytes}. */
export function resultPayload(r: ExecuteResult): Record<string, unknown>;
/** An intent a human rejected, or whose hold timed out or failed. */
export class HoldRefusedError extends Error {
  constructor(hold: Hold);
  readonly hold: Hold;
}

/** A client of annald's HTTP API, acting as one actor. */
export class AnnalClient {
  constructor(
    baseURL: string,
    options?: { credential?: string; retry?: RetryPolicy; fetch?: typeof fetch; signingKey?: SigningKey },
  );
  /** The log's origin and the client's actor, which every signature names (fetched once). */
  signingIdentity(): Promise<{ origin: string; by: string }>;
  /** Sends one request under the retry policy and returns the answer's bytes; AnnalError on an error answer. */
  request(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Uint8Array>;
  /** Submits an action: its receipt once logged ("held" with hold_id when a human must answer first). */
  submit(action: ActionRequest, options?: { waitPublished?: boolean; signal?: AbortSignal }): Promise<Receipt>;
  createAgent(req: {
    name: string;
    purpose: string;
    kind?: string;
    grants?: Grant[];
    energy?: number;
    trust?: number;
    consensus?: boolean;
    expires?: string;
    /** The actor's signing key (a SigningKey's verifierKey). */
    signing_key?: string;
    /** Every request of the actor must be signed by it. */
    require_signed?: boolean;
  }): Promise<{ id: string; credential: string; index: number; energy: number }>;
  issueEnvelope(req: {
    holder: string;
    budget: number;
    grants: Grant[];
    hold_on?: Grant[];
    hold_timeout_secs?: number;
    expires?: string;
  }): Promise<{ id: string; holder: string; budget: number }>;
  hold(id: string, signal?: AbortSignal): Promise<Hold>;
  /** Polls a hold until it is no longer pending. */
  waitHold(id: string, options?: { signal?: AbortSignal; pollMs?: number }): Promise<Hold>;
  answerHold(id: string, decision: "approve" | "reject", reason?: string): Promise<Receipt>;
  /**
   * Submits an execute intent (rules version 3) on target, input the content id of what will run:
   * allowed, or held (holdId set; settleIntent waits for the human). A denial is an AnnalError.
   */
  submitIntent(req: IntentRequest): Promise<Intent>;
  /** Waits for a held intent's answer: the intent a result names, or HoldRefusedError. */
  settleIntent(intent: Intent, options?: { signal?: AbortSignal; pollMs?: number }): Promise<Intent>;
  /**
   * Submits an execute intent and returns once the kernel allowed it (the Go client's DecideIntent):
   * held, onHeld is called and it waits for a human (rejection: HoldRefusedError); denied, an AnnalError.
   */
  decideIntent(
    req: IntentRequest & { onHeld?: (holdId: string) => void; pollMs?: number },
  ): Promise<Intent>;
  /** Commits what ran under intent (artifactHash defaults to outputOID). */
  recordResult(
    intent: Intent,
    result: { outputOID: string; artifactHash?: string; exitCode?: number; outputBytes?: number; about?: Record<string, unknown> },
    options?: { signal?: AbortSignal },
  ): Promise<Receipt>;
  info(signal?: AbortSignal): Promise<{ origin: string; verifier_key: string; size: number; checkpoint_size: number }>;
  /** The raw log entry at index (canonical JSON). */
  event(index: number | bigint, signal?: AbortSignal): Promise<Uint8Array>;
  checkpoint(signal?: AbortSignal): Promise<string>;
  /** The tlog-proof of index against the latest checkpoint (AnnalError 409 while none covers it). */
  proof(index: number | bigint, signal?: AbortSignal): Promise<string>;
  waitProof(index: number | bigint, options?: { signal?: AbortSignal; pollMs?: number }): Promise<string>;
  /** Fetches the entry and its proof and verifies them offline against vkey, the log key the caller trusts. */
  fetchAndVerify(
    index: number | bigint,
    vkey: string,
    options?: { signal?: AbortSignal },
  ): Promise<{ entry: Uint8Array; proof: string; result: ProofResult }>;
  /** The actor whose credential the client presents. */
  whoAmI(signal?: AbortSignal): Promise<Actor>;
  /** An actor's record and energy (its own, its creator's or root's view). */
  actor(id: string, signal?: AbortSignal): Promise<Actor>;
  /** The actors the caller may see: itself, those it created, and for root everyone. */
  actors(signal?: AbortSignal): Promise<Actor[]>;
  /** The envelopes the client's actor holds or issued. */
  envelopes(signal?: AbortSignal): Promise<Envelope[]>;
  envelope(id: string, signal?: AbortSignal): Promise<Envelope>;
  /** Revokes an envelope and its sub-envelopes (its issuer, or root). */
  revokeEnvelope(id: string, reason?: string): Promise<Receipt>;
  /** The holds the client's actor may see; status filters ("pending"). */
  holds(status?: string, signal?: AbortSignal): Promise<Hold[]>;
  /** What the actor may still spend: balance, each envelope it holds with what is left, its ring. */
  budget(signal?: AbortSignal): Promise<Budget>;
  /** A page of GET /v1/events (newest first unless order is "oldest"). */
  history(query?: HistoryQuery, signal?: AbortSignal): Promise<{ events: HistoryItem[]; next_cursor?: number }>;
  /**
   * The live history, in log order, until signal aborts or the loop stops; after resumes after an
   * index. A dropped connection reopens after reconnectMs (1 s) from the last item yielded; an
   * answer other than 200 or an "event: error" throws its AnnalError.
   */
  stream(
    query?: Omit<HistoryQuery, "order" | "limit">,
    options?: { after?: number | bigint; signal?: AbortSignal; reconnectMs?: number },
  ): AsyncGenerator<HistoryItem, void, undefined>;
  /** The consistency proof between two tree sizes (for verifyConsistencyProof). */
  consistency(old: number | bigint, size: number | bigint, signal?: AbortSignal): Promise<string>;
  /** Stores a blob (annald --keep-blobs); its OID, checked against the bytes sent. */
  putBlob(data: Uint8Array | string, signal?: AbortSignal): Promise<string>;
  /** A blob's bytes (a human's credential), checked to hash to id. */
  blob(id: string, signal?: AbortSignal): Promise<Uint8Array>;
  /** Writes a file of the agent file system (vfs://AGENT/PATH); signed as the action it is by a signing client. */
  vfsPut(
    uri: string,
    data: Uint8Array | string,
    options?: { envelope?: string; signal?: AbortSignal },
  ): Promise<{ uri: string; oid: string; size: number; receipt: Receipt }>;
  /** The files at or under a directory of the tree. */
  vfsList(uri: string, signal?: AbortSignal): Promise<{ uri: string; files: VFSFile[]; resumed?: number }>;
  /** A file's bytes, checked against the OID the log recorded (file), or a view of the log (no file). */
  vfsRead(uri: string, signal?: AbortSignal): Promise<{ data: Uint8Array; file?: VFSFile }>;
  /** Erases a data subject's sealed payloads (a human). */
  eraseSubject(subject: string, reason?: string): Promise<Receipt>;
  /** Opens a session (the kernel draws its id when absent). */
  createSession(req?: { id?: string; config?: unknown }): Promise<{ receipt: Receipt; record?: any }>;
  /** Changes a session: op state (with state), join, leave, grant, substitute, lock, unlock or ack. */
  changeSession(
    id: string,
    req: { op: string; state?: string; agent?: string; granted?: string; path?: string; head?: string },
  ): Promise<{ receipt: Receipt; record?: any }>;
  /** Records one turn's file changes in a session's delta chain. */
  appendDelta(session: string, turnId: string, changes: DeltaChange[]): Promise<{ receipt: Receipt; record?: any }>;
  /** A session's delta chain with log indices, verified (hashes and links from the zero hash) before it is returned. */
  deltas(session: string, signal?: AbortSignal): Promise<{ index: number; delta: Record<string, any> }[]>;
  /** Which actions the actor could ever be allowed, in order. */
  mayEver(
    actions: { type: string; target: string }[],
    observeNeedsGrant?: boolean,
  ): Promise<{ allowed: boolean; gate?: string; reason?: string }[]>;
  /** Registers, rotates (key set) or revokes (no key) an actor's signing key. */
  setSigningKey(id: string, req: { key?: string; require_signed?: boolean; reason?: string }): Promise<Receipt>;
}

export const SIGNED_STATEMENT_CONTEXT: "annal/signed-request/v1\n";
export const SEAL_CONTEXT: "annal/sealed-payload/v1\n";
export const SIGNATURE_HEADER: "Annal-Signature";
/** A sealed payload's commitment: "sha256:" || hex(SHA-256("annal/sealed-payload/v1\n" || salt || JCS(payload))). */
export function sealCommitment(salt: Uint8Array, payload: unknown): Promise<string>;
/** An action body as a signature covers it: a sealing body's payload, salt, seal and subject become "sealed": {commitment, subject}. */
export function sealedBody(body: unknown): Promise<unknown>;
/** The bytes a request signature covers; body is the request's JSON text as sent. */
export function signedStatement(r: {
  origin: string;
  by: string;
  nonce: string;
  time: string;
  method: string;
  path: string;
  body?: string;
}): Promise<Uint8Array>;
/** An Ed25519 request-signing key. */
export class SigningKey {
  readonly name: string;
  readonly keyHash: number;
  /** "<name>+<id>+<base64 0x01||public key>": what the actor registers (signing_key). */
  readonly verifierKey: string;
  /** The key id, 8 hex digits. */
  readonly keyId: string;
  /** Signs bytes; the signature in base64. */
  sign(msg: Uint8Array): Promise<string>;
  /** The Annal-Signature header of a request (a new nonce and the time now unless given). */
  header(r: { origin: string; by: string; method: string; path: string; body?: string; nonce?: string; time?: string }): Promise<string>;
}
/** Loads "PRIVATE+KEY+<name>+<id>+<base64 0x01||seed>" (x/mod note form, as `annal keys generate` writes it). */
export function loadSigningKey(skey: string): Promise<SigningKey>;
/** Generates a signing key (from seed when given, 32 bytes). */
export function generateSigningKey(
  name: string,
  seed?: Uint8Array,
): Promise<{ privateKey: string; verifierKey: string; key: SigningKey }>;

export interface Actor {
  id: string;
  kind: "agent" | "human" | string;
  name: string;
  purpose?: string;
  creator?: string;
  expires?: string;
  status: string;
  grants?: Grant[];
  share: number;
  balance: number;
  reserved: number;
  consumed: number;
  signing_key?: string;
  require_signed?: boolean;
  seal_payloads?: boolean;
}
export interface Envelope {
  id: string;
  holder: string;
  issuer: string;
  parent?: string;
  budget: number;
  consumed: number;
  reserved: number;
  grants: Grant[];
  hold_on?: Grant[];
  hold_timeout_secs?: number;
  expires?: string;
  revoked: boolean;
  index: number;
}
export interface Budget {
  actor: string;
  balance: number;
  reserved: number;
  envelopes: {
    id: string;
    budget: number;
    /** budget - consumed - reserved */
    remaining: number;
    grants: Grant[];
    hold_on?: Grant[];
    expires?: string;
    revoked: boolean;
    parent?: string;
  }[];
  /** The actor's ring view, when the kernel shows it one. */
  ring?: unknown;
}
/** GET /v1/events's filters (each at most once), order and paging. */
export interface HistoryQuery {
  actor?: string;
  envelope?: string;
  session?: string;
  kind?: string;
  type?: string;
  outcome?: string;
  /** A target prefix. */
  target?: string;
  /** RFC 3339 instants. */
  since?: string;
  until?: string;
  trace_id?: string;
  order?: "newest" | "oldest";
  cursor?: number | bigint;
  limit?: number;
}
/** One event of the history: the event as logged (parsed; canonicalJSON gives its bytes back). */
export interface HistoryItem {
  index: number;
  leaf_hash: string;
  event: any;
  /** A sealed payload the kernel still holds, opened for the viewer. */
  sealed_payload?: unknown;
  /** The sealed payload's subject was erased: it is gone. */
  erased?: boolean;
}
export interface VFSFile {
  path: string;
  oid: string;
  index: number;
  writer: string;
  time: string;
}

/** The largest file one write to the agent file system stores. */
export const MAX_VFS_CONTENT: number;
/** A URI that names no path of an agent's tree, or a write to a read-only one (format/vfspath's errors). */
export class VFSPathError extends Error {}
/** A path of an agent's tree. */
export class VFSPath {
  constructor(agent: string, rel: string);
  readonly agent: string;
  /** Relative to the tree; "" for its root. */
  readonly rel: string;
  /** A file's directory ("" for a directory or a view). */
  readonly dir: string;
  readonly isDir: boolean;
  readonly isView: boolean;
  readonly uri: string;
  /** vfs/AGENT/PATH, the target the log records. */
  readonly target: string;
  readonly writeType: "create" | "mutate";
  readonly apiPath: string;
  checkWritable(): void;
}
/** Parses vfs://AGENT/PATH as format/vfspath does (VFSPathError with its message when refused). */
export function parseVFSURI(uri: string): VFSPath;
export function parseVFS(agent: string, rel: string): VFSPath;
/** The request a signed write of content to p states: POST /v1/actions with the action it is. */
export function vfsWriteRequest(
  p: VFSPath,
  content: Uint8Array,
  envelope?: string,
): Promise<{ method: string; path: string; body: string }>;

export interface DeltaChange {
  path: string;
  operation: "create" | "modify" | "delete";
  /** sha256:<64 hex> of the new content (not for a delete). */
  content_hash?: string;
}
/** Verifies a delta chain as GET /v1/sessions/{id}/deltas answers it; returns its head. */
export function verifyDeltaList(chain: { index: number; delta: Record<string, any> }[]): Promise<string>;
/** The parent_hash of a session's first delta. */
export const ZERO_DELTA_HASH: string;
/** A delta's delta_hash: hex(SHA-256(raw(parent_hash) || JCS(the delta without delta_hash))). */
export function deltaHash(delta: Record<string, unknown> | string): Promise<string>;
/** The delta of a parsed session.delta event, checked on its own (members, hashes, session, actor, time). */
export function checkDeltaEvent(ev: unknown): Promise<{ id: string; session: string; parentHash: string; deltaHash: string }>;
/**
 * Verifies session.delta entries, in log order, as one session's chain (from the zero hash unless
 * complete is false); a VerificationError of check "entry" or "delta chain" with the Go verifier's message.
 */
export function verifyDeltaChain(
  entries: (string | Uint8Array)[],
  complete?: boolean,
): Promise<{ session: string; deltas: number; complete: boolean; firstParent: string; head: string }>;

export const EVIDENCE_FORMAT: "annal.dev/equivocation-evidence/v1";
export const MAX_EVIDENCE_SIZE: number;
/**
 * Verifies an equivocation evidence file (two checkpoints of one log that cannot both be true);
 * logKey, if given, must be the file's. A VerificationError with the Go verifier's message otherwise.
 */
export function verifyEvidence(
  data: string | Uint8Array,
  logKey?: string,
): Promise<{ origin: string; logKey: string; sizes: bigint[]; roots: Uint8Array[]; prefixRoot?: Uint8Array }>;
