// A small HTTP client of annald's API (api/api.go) over fetch: submit an
// action and get its receipt, read entries, checkpoints and proofs, and
// verify a proof offline against a verifier key the caller trusts. Errors
// are AnnalError, carrying the kernel's stage, gate, reason and the log
// index of the recorded denial. Retries follow the annal CLI's rules.

import { encodeBase64 } from "./encoding.js";
import { HoldRefusedError, intentPayload, resultPayload } from "./execute.js";
import { verifyProof } from "./proof.js";
import { SIGNATURE_HEADER } from "./signing.js";
import { verifyDeltaList } from "./deltas.js";
import { streamItems } from "./stream.js";
import { MAX_VFS_CONTENT, VFSPath, VFSPathError, parseVFS, parseVFSURI, vfsWriteRequest } from "./vfspath.js";
import { oidOf } from "./encoding.js";
import { keptFetch } from "./keptfetch.js";

/** What the client reads from any answer but a blob's or a file's (client.MaxResponseBody). */
export const MAX_RESPONSE_BODY = 1 << 20;
/** What the client reads of a blob or a file of the agent file system (client.MaxBlobBody). */
export const MAX_BLOB_BODY = 64 << 20;
/** The page the client asks list endpoints for (the Go client's listPageSize). */
const LIST_PAGE_SIZE = 200;
/** How many pages one list follows at most. */
const MAX_LIST_PAGES = 10000;

/**
 * @typedef {object} RetryPolicy
 * @property {number} attempts sends in all (0 or 1: no retry)
 * @property {number} firstMs the first wait, doubled each time
 * @property {number} maxMs the longest wait (0: no bound)
 */

/** The annal CLI's retry policy (client.DefaultRetry). */
export const DEFAULT_RETRY = Object.freeze({ attempts: 6, firstMs: 250, maxMs: 5000 });

const STATUS_TEXT = /** @type {Record<number, string>} */ ({
  400: "Bad Request",
  401: "Unauthorized",
  402: "Payment Required",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  413: "Request Entity Too Large",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
});

/** An error answer from the kernel (api.Error), as the Go client's client.Error. */
export class AnnalError extends Error {
  /**
   * @param {number} status
   * @param {{error?: string, stage?: string, gate?: string, denial_index?: number, reason?: string,
   *   signal?: string, trace_id?: string, outcome_unknown?: boolean, retryable?: boolean, stopped?: boolean}} body
   * @param {string} text the raw answer, when it is not the kernel's JSON
   * @param {number | undefined} retryAfterMs
   */
  constructor(status, body, text, retryAfterMs) {
    const message = body.error || text.trim();
    const statusText = `${status} ${STATUS_TEXT[status] ?? ""}`.trimEnd();
    let full = body.stage ? `annal: ${statusText} (stage ${body.stage}): ${message}` : `annal: ${statusText}: ${message}`;
    if (body.denial_index !== undefined) full += ` (the denial is recorded in the log at index ${body.denial_index})`;
    if (body.signal) full += `; the kernel sent the agent ${body.signal}`;
    super(full);
    this.name = "AnnalError";
    /** The HTTP status. */
    this.status = status;
    /** The kernel's explanation. */
    this.kernelMessage = message;
    /** The pipeline stage that denied the action, if one did. */
    this.stage = body.stage;
    /** The check within the stage. */
    this.gate = body.gate;
    /** The spec's name of the refusal, where it has one. */
    this.reason = body.reason;
    /** Where the refusal was recorded in the log, if it was. */
    this.denialIndex = body.denial_index;
    this.signal = body.signal;
    this.traceId = body.trace_id;
    /** The write failed after the entry reached the log: it may be logged; never sent again. */
    this.outcomeUnknown = body.outcome_unknown === true;
    this.retryable = body.retryable === true;
    /** The kernel takes no writes until an operator acts. */
    this.stopped = body.stopped === true;
    this.retryAfterMs = retryAfterMs;
  }

  /** Whether the kernel did nothing and asks to be asked again. */
  get shouldRetry() {
    if (this.outcomeUnknown || this.stopped) return false;
    return this.retryable || this.status === 429 || this.status === 503;
  }
}

/**
 * @typedef {object} ActionRequest
 * @property {"observe" | "create" | "mutate" | "execute"} type
 * @property {string} target
 * @property {unknown} [payload]
 * @property {string} [payload_hash]
 * @property {string} [envelope]
 * @property {string} [session]
 * @property {string} [action_id]
 * @property {boolean} [seal] keep the payload out of the log, sealed under subject's key
 * @property {string} [subject]
 * @property {string} [salt] standard base64 of 32 bytes; a signing client draws it
 */

/**
 * @typedef {object} Receipt
 * @property {"committed" | "held"} status
 * @property {string} [hold_id]
 * @property {string} event_id
 * @property {number} index
 * @property {string} leaf_hash
 * @property {string} time
 * @property {string} actor
 * @property {string} type
 * @property {string} target
 * @property {string} [envelope]
 * @property {number} cost
 * @property {string} [checkpoint]
 * @property {string} [proof]
 * @property {string} [proof_error]
 * @property {string} [trace_id]
 */

export class AnnalClient {
  /**
   * @param {string} baseURL the kernel's URL, e.g. "http://127.0.0.1:7420"
   * @param {object} [options]
   * @param {string} [options.credential] the actor's credential ("" or absent: read-only)
   * @param {RetryPolicy} [options.retry] the default never retries; DEFAULT_RETRY is the CLI's
   * @param {typeof fetch} [options.fetch] the default is keptFetch (src/keptfetch.js): node:http on a kept
   *   connection for plain HTTP on Node, globalThis.fetch otherwise
   * @param {import("./signing.js").SigningKey} [options.signingKey] signs every POST, PUT and
   *   DELETE (but blob uploads) with the actor's registered key: its events then carry the signature
   */
  constructor(baseURL, options = {}) {
    this.base = new URL(baseURL.endsWith("/") ? baseURL : baseURL + "/");
    this.credential = options.credential ?? "";
    this.retry = options.retry ?? { attempts: 1, firstMs: 0, maxMs: 0 };
    this.fetch = options.fetch ?? keptFetch;
    this.signingKey = options.signingKey;
    /** @type {Promise<{origin: string, by: string}> | undefined} */
    this.identity = undefined;
  }

  /** The log's origin and the client's actor, which every signature names; fetched once. */
  signingIdentity() {
    this.identity ??= (async () => {
      const info = await this.info(undefined);
      const me = await this.#json("GET", "v1/whoami");
      return { origin: info.origin, by: me.id };
    })();
    this.identity.catch(() => (this.identity = undefined));
    return this.identity;
  }

  /**
   * Sends one request under the retry policy; returns the answer's bytes.
   * @param {string} method @param {string} path @param {unknown} [body]
   * @param {AbortSignal} [signal]
   * @param {{link?: string}} [answer] receives the answer's Link header
   * @returns {Promise<Uint8Array>}
   */
  async request(method, path, body, signal, answer) {
    let wait = this.retry.firstMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#once(method, path, body, signal, answer);
      } catch (e) {
        if (!(e instanceof AnnalError) || !e.shouldRetry || attempt >= this.retry.attempts) throw e;
        let d = Math.max(wait, e.retryAfterMs ?? 0);
        if (this.retry.maxMs > 0) d = Math.min(d, this.retry.maxMs);
        await sleep(d, signal);
        wait *= 2;
      }
    }
  }

  /**
   * Sends one request; body is JSON to encode, or bytes sent as they are
   * (a blob, a file of the agent file system).
   * @param {string} method @param {string} path @param {unknown} body @param {AbortSignal} [signal]
   * @param {{link?: string}} [answer]
   */
  async #once(method, path, body, signal, answer) {
    /** @type {Record<string, string>} */
    const headers = {};
    const bytes = body instanceof Uint8Array;
    if (body !== undefined) headers["Content-Type"] = bytes ? "application/octet-stream" : "application/json";
    if (this.credential) headers.Authorization = `Bearer ${this.credential}`;
    const rel = path.replace(/^\//, "");
    const url = new URL(rel, this.base);
    const text = body === undefined || bytes ? undefined : JSON.stringify(body);
    if (this.signingKey && !["GET", "HEAD"].includes(method) && !rel.startsWith("v1/blobs")) {
      const { origin, by } = await this.signingIdentity();
      const stated = await signedForm(method, url, body, text);
      headers[SIGNATURE_HEADER] = await this.signingKey.header({ origin, by, ...stated });
    }
    const sent = bytes ? /** @type {BodyInit} */ (/** @type {unknown} */ (body)) : text;
    const resp = await this.fetch(url, { method, headers, body: sent, signal });
    const limit = method === "GET" && (rel.startsWith("v1/blobs/") || rel.startsWith("v1/vfs/")) ? MAX_BLOB_BODY : MAX_RESPONSE_BODY;
    const raw = await readLimited(resp, limit, `${method} ${path}`);
    if (resp.status >= 300) {
      const text = new TextDecoder("utf-8", { ignoreBOM: true }).decode(raw);
      let parsed = {};
      try {
        const j = JSON.parse(text);
        if (j && typeof j.error === "string" && j.error !== "") parsed = j;
      } catch {
        /* not the kernel's JSON: the text is the message */
      }
      const ra = Number.parseInt(resp.headers.get("Retry-After") ?? "", 10);
      throw new AnnalError(resp.status, parsed, text, Number.isFinite(ra) && ra >= 0 ? ra * 1000 : undefined);
    }
    if (answer) answer.link = resp.headers.get("Link") ?? "";
    return raw;
  }

  /**
   * @param {string} method @param {string} path @param {unknown} [body] @param {AbortSignal} [signal]
   * @param {{link?: string}} [answer]
   */
  async #json(method, path, body, signal, answer) {
    const raw = await this.request(method, path, body, signal, answer);
    try {
      return JSON.parse(new TextDecoder("utf-8", { ignoreBOM: true }).decode(raw));
    } catch (e) {
      throw new Error(`annal: ${method} ${path}: answer is not the expected JSON: ${/** @type {Error} */ (e).message}`);
    }
  }

  /**
   * Every item of a list endpoint: annald answers lists in pages, each
   * naming the next in a Link header (rel="next"), which this follows.
   * @param {string} path @param {AbortSignal} [signal]
   * @returns {Promise<any[]>}
   */
  async #list(path, signal) {
    /** @type {any[]} */
    const all = [];
    let next = `${path}?limit=${LIST_PAGE_SIZE}`;
    for (let pages = 0; next; pages++) {
      if (pages === MAX_LIST_PAGES) throw new Error(`annal: GET ${path}: more than ${MAX_LIST_PAGES} pages`);
      /** @type {{link?: string}} */
      const answer = {};
      const items = await this.#json("GET", next, undefined, signal, answer);
      if (!Array.isArray(items)) throw new Error(`annal: GET ${next}: answer is not a JSON list`);
      all.push(...items);
      const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec(answer.link ?? "");
      next = "";
      if (m) {
        if (!m[1].startsWith(`/${path}?`) || items.length === 0) throw new Error(`annal: GET ${path}: the next page ${m[1]} is not a page of the same list`);
        next = m[1].slice(1);
      }
    }
    return all;
  }

  /**
   * Submits an action; the receipt comes once the kernel has durably
   * logged it ("held" with hold_id when a human must answer first). With
   * waitPublished the receipt also carries the checkpoint and tlog-proof.
   * @param {ActionRequest} action
   * @param {{waitPublished?: boolean, signal?: AbortSignal}} [options]
   * @returns {Promise<Receipt>}
   */
  async submit(action, options = {}) {
    // A signing client that seals a payload draws the commitment's salt and
    // names the subject (its own actor by default), so that it signs the
    // commitment the event will carry.
    if (this.signingKey && (action.seal || action.subject || action.salt)) {
      action = { ...action };
      action.subject ||= (await this.signingIdentity()).by;
      action.salt ||= encodeBase64(crypto.getRandomValues(new Uint8Array(32)));
    }
    return this.#json("POST", options.waitPublished ? "v1/actions?wait=published" : "v1/actions", action, options.signal);
  }

  /**
   * Creates an agent (or, by root, a human); the client's actor must be a human.
   * @param {{name: string, purpose: string, kind?: string, grants?: {pattern: string, actions: string[]}[],
   *   energy?: number, trust?: number, consensus?: boolean, expires?: string, signing_key?: string,
   *   require_signed?: boolean}} req
   * @returns {Promise<{id: string, credential: string, index: number, energy: number}>}
   */
  createAgent(req) {
    return this.#json("POST", "v1/agents", req);
  }

  /**
   * Issues an envelope: budget and grants an agent acts under, and what needs a human.
   * @param {{holder: string, budget: number, grants: {pattern: string, actions: string[]}[],
   *   hold_on?: {pattern: string, actions: string[]}[], hold_timeout_secs?: number, expires?: string}} req
   * @returns {Promise<{id: string, holder: string, budget: number}>}
   */
  issueEnvelope(req) {
    return this.#json("POST", "v1/envelopes", req);
  }

  /**
   * A hold and its status ("pending", "approved", "rejected", "timed_out", "failed").
   * @param {string} id
   * @returns {Promise<import("./execute.js").HoldStatus>}
   */
  hold(id, /** @type {AbortSignal | undefined} */ signal) {
    return this.#json("GET", `v1/holds/${encodeURIComponent(id)}`, undefined, signal);
  }

  /**
   * Polls a hold until a human (or its timeout) answers it.
   * @param {string} id
   * @param {{signal?: AbortSignal, pollMs?: number}} [options]
   */
  async waitHold(id, options = {}) {
    for (;;) {
      const h = await this.hold(id, options.signal);
      if (h.status !== "pending") return h;
      await sleep(options.pollMs ?? 100, options.signal);
    }
  }

  /**
   * Approves or rejects a hold; the client's actor must be a human allowed to.
   * @param {string} id @param {"approve" | "reject"} decision @param {string} [reason]
   * @returns {Promise<Receipt>}
   */
  answerHold(id, decision, reason) {
    return this.#json("POST", `v1/holds/${encodeURIComponent(id)}/${decision}`, reason ? { reason } : {});
  }

  /**
   * Submits an execute intent (rules version 3) for what is about to run
   * on target, input its content id and about what the log says of it, and
   * returns it as the kernel decided it: allowed, or held (holdId set, its
   * index not yet one a result may name: settleIntent waits for the human).
   * A denial is the kernel's AnnalError.
   * @param {{target: string, envelope?: string, session?: string, input: string,
   *   about?: Record<string, unknown>, signal?: AbortSignal}} req
   * @returns {Promise<import("./execute.js").Intent>}
   */
  async submitIntent(req) {
    const payload = intentPayload(req.input, req.about);
    const rc = await this.submit(
      { type: "execute", target: req.target, payload, envelope: req.envelope, session: req.session },
      { signal: req.signal },
    );
    /** @type {import("./execute.js").Intent} */
    const intent = { index: rc.index, target: req.target, envelope: rc.envelope, session: req.session, inputOID: req.input };
    if (rc.status === "held") intent.holdId = rc.hold_id;
    return intent;
  }

  /**
   * Waits for a held intent's answer: the intent a result names (its index
   * the approving entry), or HoldRefusedError when a human rejected it or
   * its hold timed out or failed. An intent that was not held is returned as is.
   * @param {import("./execute.js").Intent} intent
   * @param {{signal?: AbortSignal, pollMs?: number}} [options]
   * @returns {Promise<import("./execute.js").Intent>}
   */
  async settleIntent(intent, options = {}) {
    if (!intent.holdId) return intent;
    const h = await this.waitHold(intent.holdId, { signal: options.signal, pollMs: options.pollMs ?? 250 });
    if (h.status !== "approved") throw new HoldRefusedError(h);
    if (typeof h.answered_at !== "number") throw new Error(`annal: hold ${h.id} is approved but names no approving entry`);
    return { ...intent, index: h.answered_at };
  }

  /**
   * Submits an execute intent and returns once the kernel allowed it, as
   * the Go client's DecideIntent: when a hold rule holds it, onHeld is
   * called with the hold id and decideIntent waits for a human's answer (a
   * rejection is a HoldRefusedError); a denial is the kernel's AnnalError.
   * Nothing may run unless it returns.
   * @param {{target: string, envelope?: string, session?: string, input: string,
   *   about?: Record<string, unknown>, onHeld?: (holdId: string) => void, signal?: AbortSignal, pollMs?: number}} req
   * @returns {Promise<import("./execute.js").Intent>}
   */
  async decideIntent(req) {
    const intent = await this.submitIntent(req);
    if (intent.holdId) req.onHeld?.(intent.holdId);
    return this.settleIntent(intent, req);
  }

  /**
   * Commits what ran under intent (artifactHash defaults to outputOID). A
   * result that could not be committed leaves the intent open in the log:
   * the caller must report the run as failed.
   * @param {import("./execute.js").Intent} intent
   * @param {{outputOID: string, artifactHash?: string, exitCode?: number, outputBytes?: number,
   *   about?: Record<string, unknown>}} result
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<Receipt>}
   */
  recordResult(intent, result, options = {}) {
    const payload = resultPayload({
      ...result,
      artifactHash: result.artifactHash ?? result.outputOID,
      intent: intent.index,
      inputOID: intent.inputOID,
    });
    return this.submit(
      { type: "execute", target: intent.target, payload, envelope: intent.envelope, session: intent.session },
      { signal: options.signal },
    );
  }

  /** The log's origin, verifier key and size (GET /v1/info). */
  info(/** @type {AbortSignal | undefined} */ signal) {
    return this.#json("GET", "v1/info", undefined, signal);
  }

  /** The raw log entry at index (canonical JSON). */
  event(/** @type {number | bigint} */ index, /** @type {AbortSignal | undefined} */ signal) {
    return this.request("GET", `v1/events/${index}`, undefined, signal);
  }

  /** The latest signed checkpoint. */
  async checkpoint(/** @type {AbortSignal | undefined} */ signal) {
    return new TextDecoder("utf-8", { ignoreBOM: true }).decode(await this.request("GET", "checkpoint", undefined, signal));
  }

  /** The tlog-proof of index against the latest checkpoint; 409 while none covers it. */
  async proof(/** @type {number | bigint} */ index, /** @type {AbortSignal | undefined} */ signal) {
    return new TextDecoder("utf-8", { ignoreBOM: true }).decode(await this.request("GET", `v1/proof/${index}`, undefined, signal));
  }

  /**
   * Polls proof until a checkpoint covers index (or signal aborts).
   * @param {number | bigint} index
   * @param {{signal?: AbortSignal, pollMs?: number}} [options]
   */
  async waitProof(index, options = {}) {
    for (;;) {
      try {
        return await this.proof(index, options.signal);
      } catch (e) {
        if (!(e instanceof AnnalError) || e.status !== 409) throw e;
      }
      await sleep(options.pollMs ?? 50, options.signal);
    }
  }

  /**
   * Fetches the entry at index and its proof (waiting for a checkpoint
   * that covers it), and verifies them offline against vkey, the log's
   * verifier key as the caller knows it, never as the server says it.
   * @param {number | bigint} index
   * @param {string} vkey
   * @param {{signal?: AbortSignal}} [options]
   */
  async fetchAndVerify(index, vkey, options = {}) {
    const entry = await this.event(index, options.signal);
    const proof = await this.waitProof(index, options);
    const result = await verifyProof(entry, proof, vkey);
    return { entry, proof, result };
  }

  /**
   * The actor whose credential the client presents (GET /v1/whoami).
   * @param {AbortSignal} [signal]
   */
  whoAmI(signal) {
    return this.#json("GET", "v1/whoami", undefined, signal);
  }

  /**
   * An actor's record and energy: its own, its creator's or root's view.
   * @param {string} id @param {AbortSignal} [signal]
   */
  actor(id, signal) {
    return this.#json("GET", `v1/actors/${encodeURIComponent(id)}`, undefined, signal);
  }

  /**
   * The actors the caller may see: itself, those it created, and for root everyone.
   * @param {AbortSignal} [signal]
   */
  actors(signal) {
    return this.#list("v1/actors", signal);
  }

  /**
   * The envelopes the client's actor holds or issued.
   * @param {AbortSignal} [signal]
   */
  envelopes(signal) {
    return this.#list("v1/envelopes", signal);
  }

  /**
   * One envelope the client's actor holds or issued.
   * @param {string} id @param {AbortSignal} [signal]
   */
  envelope(id, signal) {
    return this.#json("GET", `v1/envelopes/${encodeURIComponent(id)}`, undefined, signal);
  }

  /**
   * Revokes an envelope and, with it, its sub-envelopes.
   * @param {string} id @param {string} [reason]
   * @returns {Promise<Receipt>}
   */
  revokeEnvelope(id, reason) {
    return this.#json("POST", `v1/envelopes/${encodeURIComponent(id)}/revoke`, reason ? { reason } : {});
  }

  /**
   * The holds the client's actor may see; status filters ("pending").
   * @param {string} [status] @param {AbortSignal} [signal]
   */
  holds(status, signal) {
    return this.#json("GET", status ? `v1/holds?status=${encodeURIComponent(status)}` : "v1/holds", undefined, signal);
  }

  /**
   * What the client's actor may still spend, as the budget tool of `annal
   * mcp` shows it: its energy balance, each envelope it holds with what is
   * left of it, and its ring (when the kernel shows it one).
   * @param {AbortSignal} [signal]
   */
  async budget(signal) {
    const me = await this.whoAmI(signal);
    const envs = /** @type {any[]} */ (await this.envelopes(signal));
    const envelopes = envs
      .filter((v) => v.holder === me.id)
      .map((v) => ({ id: v.id, budget: v.budget, remaining: v.budget - v.consumed - v.reserved, grants: v.grants,
        hold_on: v.hold_on, expires: v.expires, revoked: v.revoked === true, parent: v.parent }));
    /** @type {unknown} */
    let ring;
    try {
      const rings = await this.#list("v1/rings", signal);
      if (Array.isArray(rings)) ring = rings.find((r) => r && r.agent === me.id);
    } catch (e) {
      if (!(e instanceof AnnalError)) throw e; // an actor may not be shown rings: the rest stands
    }
    return { actor: me.id, balance: me.balance, reserved: me.reserved, envelopes, ring };
  }

  /**
   * A page of the history (GET /v1/events), newest first unless order is
   * "oldest"; query holds its filters (actor, envelope, session, kind,
   * type, outcome, target, since, until, trace_id), order, cursor and limit,
   * as the Go client's History. next_cursor, when set, is the next page's cursor.
   * @param {HistoryQuery} [query] @param {AbortSignal} [signal]
   * @returns {Promise<{events: HistoryItem[], next_cursor?: number}>}
   */
  history(query = {}, signal) {
    const qs = queryString(query);
    return this.#json("GET", qs ? `v1/events?${qs}` : "v1/events", undefined, signal);
  }

  /**
   * Follows the live history (GET /v1/events/stream) with query's filters
   * (those of history but order and limit): yields each history item in
   * log order, for ever, until signal aborts (the iteration then ends) or
   * the loop stops. after starts it after that index (resume: the last
   * index seen); else cursor, else the next event logged. A dropped
   * connection is reopened after 1 s from the last item yielded, so none is
   * missed or repeated; an answer other than 200, or an "event: error",
   * throws its AnnalError (client.Stream's rules).
   * @param {Omit<HistoryQuery, "order" | "limit">} [query]
   * @param {{after?: number | bigint, signal?: AbortSignal, reconnectMs?: number}} [options]
   * @returns {AsyncGenerator<HistoryItem>}
   */
  async *stream(query = {}, options = {}) {
    const { signal } = options;
    let after = options.after;
    for (;;) {
      if (signal?.aborted) return;
      try {
        const resp = await this.#openStream(query, after, signal);
        for await (const item of streamItems(/** @type {ReadableStream<Uint8Array>} */ (resp.body))) {
          yield item;
          after = item.index;
        }
      } catch (e) {
        if (signal?.aborted) return;
        if (e instanceof AnnalError) throw e;
        // The connection dropped (or never opened): open it again from after.
      }
      try {
        await sleep(options.reconnectMs ?? 1000, signal);
      } catch {
        return;
      }
    }
  }

  /**
   * @param {Record<string, unknown>} query @param {number | bigint | undefined} after
   * @param {AbortSignal | undefined} signal
   */
  async #openStream(query, after, signal) {
    const qs = queryString(query);
    /** @type {Record<string, string>} */
    const headers = { Accept: "text/event-stream" };
    if (this.credential) headers.Authorization = `Bearer ${this.credential}`;
    if (after !== undefined) headers["Last-Event-ID"] = String(after);
    const resp = await this.fetch(new URL(qs ? `v1/events/stream?${qs}` : "v1/events/stream", this.base), { headers, signal });
    if (resp.status !== 200 || !resp.body) {
      const text = new TextDecoder().decode(await readLimited(resp, 1 << 16, "GET v1/events/stream"));
      let parsed = {};
      try {
        const j = JSON.parse(text);
        if (j && typeof j.error === "string" && j.error !== "") parsed = j;
      } catch {
        /* not the kernel's JSON */
      }
      throw new AnnalError(resp.status, parsed, text, undefined);
    }
    return resp;
  }

  /**
   * The consistency proof between two tree sizes (one base64 hash a line),
   * for verifyConsistencyProof.
   * @param {number | bigint} old @param {number | bigint} size @param {AbortSignal} [signal]
   */
  async consistency(old, size, signal) {
    return new TextDecoder().decode(await this.request("GET", `v1/proof/consistency?old=${old}&new=${size}`, undefined, signal));
  }

  /**
   * Stores data in annald's blob store (annald --keep-blobs) and returns its
   * OID, checked to be the hash of what was sent.
   * @param {Uint8Array | string} data @param {AbortSignal} [signal]
   * @returns {Promise<string>}
   */
  async putBlob(data, signal) {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const raw = await this.request("POST", "v1/blobs", bytes, signal);
    const b = JSON.parse(new TextDecoder().decode(raw));
    const want = await oidOf(bytes);
    if (b.oid !== want || b.size !== bytes.length) {
      throw new Error(`annal: the blob store answered ${b.oid} (${b.size} bytes) for ${want} (${bytes.length} bytes)`);
    }
    return want;
  }

  /**
   * The bytes of a blob (a human's credential), after checking that they
   * hash to id: the client trusts the store no more than the store its disk.
   * @param {string} id @param {AbortSignal} [signal]
   */
  async blob(id, signal) {
    const data = await this.request("GET", `v1/blobs/${encodeURIComponent(id)}`, undefined, signal);
    const got = await oidOf(data);
    if (got !== id) throw new Error(`annal: blob ${id}: the bytes served hash to ${got}`);
    return data;
  }

  /**
   * Writes data to the file uri names (vfs://AGENT/PATH), under envelope
   * (absent: the oldest of the agent's envelopes that allows it). The log
   * records the write as an action naming the content's OID, which the
   * answer must match. A signing client signs the action the write is.
   * @param {string} uri @param {Uint8Array | string} data
   * @param {{envelope?: string, signal?: AbortSignal}} [options]
   */
  async vfsPut(uri, data, options = {}) {
    const p = parseVFSURI(uri);
    p.checkWritable();
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    if (bytes.length > MAX_VFS_CONTENT) {
      throw new VFSPathError(`${uri}: ${bytes.length} bytes, more than a file of the agent file system holds (${MAX_VFS_CONTENT})`);
    }
    const path = options.envelope ? `${p.apiPath}?envelope=${encodeURIComponent(options.envelope)}` : p.apiPath;
    const out = JSON.parse(new TextDecoder().decode(await this.request("PUT", path, bytes, options.signal)));
    const want = await oidOf(bytes);
    if (out.oid !== want || out.size !== bytes.length) {
      throw new Error(`annal: ${uri}: the kernel answered ${out.oid} (${out.size} bytes) for ${want} (${bytes.length} bytes)`);
    }
    return /** @type {{uri: string, oid: string, size: number, receipt: Receipt}} */ (out);
  }

  /**
   * Lists the files at or under the directory uri names (the agent's
   * whole tree for vfs://AGENT/).
   * @param {string} uri @param {AbortSignal} [signal]
   * @returns {Promise<{uri: string, files: VFSFile[], resumed?: number}>}
   */
  vfsList(uri, signal) {
    const p = parseVFSURI(uri);
    if (!p.isDir) throw new VFSPathError(`${uri} is not a directory of the tree`);
    return this.#json("GET", p.apiPath, undefined, signal);
  }

  /**
   * The content of the file uri names, after checking that it hashes to
   * the OID the log recorded for it (file), or a view of the log
   * (policy/active.json, policy/history.json, audit/events.jsonl; file is
   * then undefined).
   * @param {string} uri @param {AbortSignal} [signal]
   * @returns {Promise<{data: Uint8Array, file?: VFSFile}>}
   */
  async vfsRead(uri, signal) {
    const p = parseVFSURI(uri);
    if (p.isDir) throw new VFSPathError(`${uri} is a directory: list it`);
    if (p.isView) return { data: await this.request("GET", p.apiPath, undefined, signal) };
    const listing = await this.vfsList(new VFSPath(p.agent, p.dir).uri, signal);
    const file = listing.files.find((f) => f.path === p.rel);
    if (!file) throw new Error(`annal: ${uri}: no such file`);
    const data = await this.request("GET", p.apiPath, undefined, signal);
    const got = await oidOf(data);
    if (got !== file.oid) {
      throw new Error(`annal: ${uri}: the bytes served hash to ${got}, not ${file.oid} (written at index ${file.index}; or written again meanwhile)`);
    }
    return { data, file };
  }

  /**
   * Erases a data subject's sealed payloads (a human): the log records it,
   * and the kernel destroys the subject's key; history then marks the
   * subject's sealed payloads erased.
   * @param {string} subject @param {string} [reason]
   * @returns {Promise<Receipt>}
   */
  eraseSubject(subject, reason) {
    return this.#json("POST", `v1/subjects/${encodeURIComponent(subject)}/erase`, reason ? { reason } : {});
  }

  /**
   * Opens a session (id: the kernel draws one when absent); config is the
   * session's configuration (isolation, consistency, …) as annald takes it.
   * @param {{id?: string, config?: unknown}} [req]
   * @returns {Promise<{receipt: Receipt, record?: any}>}
   */
  createSession(req = {}) {
    return this.#json("POST", "v1/sessions", req);
  }

  /**
   * Changes a session: op is state (with state), join, leave, grant,
   * substitute, lock, unlock or ack, as annald's API takes them.
   * @param {string} id @param {{op: string, state?: string, agent?: string, granted?: string, path?: string, head?: string}} req
   * @returns {Promise<{receipt: Receipt, record?: any}>}
   */
  changeSession(id, req) {
    return this.#json("POST", `v1/sessions/${encodeURIComponent(id)}/changes`, req);
  }

  /**
   * Records one turn's file changes in a session: a delta of the session's
   * hash chain (create, modify or delete a path, with the new content's
   * sha256), from which a human can roll the session back to any turn.
   * @param {string} session @param {string} turnId
   * @param {{path: string, operation: "create" | "modify" | "delete", content_hash?: string}[]} changes
   * @returns {Promise<{receipt: Receipt, record?: any}>}
   */
  appendDelta(session, turnId, changes) {
    return this.#json("POST", `v1/sessions/${encodeURIComponent(session)}/deltas`, { turn_id: turnId, changes });
  }

  /**
   * A session's delta chain with the log index of each delta, verified
   * before it is returned: every hash recomputes and every link holds from
   * the zero hash (verifyDeltaList).
   * @param {string} session @param {AbortSignal} [signal]
   * @returns {Promise<{index: number, delta: Record<string, any>}[]>}
   */
  async deltas(session, signal) {
    const chain = await this.#json("GET", `v1/sessions/${encodeURIComponent(session)}/deltas`, undefined, signal);
    await verifyDeltaList(chain);
    return chain;
  }

  /**
   * Which of actions the client's actor could ever be allowed (its
   * writable targets and its own policies), in order; with
   * observeNeedsGrant, observes need a grant too.
   * @param {{type: string, target: string}[]} actions @param {boolean} [observeNeedsGrant]
   * @returns {Promise<{allowed: boolean, gate?: string, reason?: string}[]>}
   */
  mayEver(actions, observeNeedsGrant = false) {
    return this.#json("POST", "v1/actions/may-ever", observeNeedsGrant ? { actions, observe_needs_grant: true } : { actions });
  }

  /**
   * Registers, rotates (key set) or revokes (key empty) actor id's signing
   * key: the actor itself, signed by its current key if it has one, or
   * root or its creator.
   * @param {string} id @param {{key?: string, require_signed?: boolean, reason?: string}} req
   * @returns {Promise<Receipt>}
   */
  setSigningKey(id, req) {
    return this.#json("POST", `v1/actors/${encodeURIComponent(id)}/key`, req);
  }
}

/** @param {number} ms @param {AbortSignal} [signal] */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(signal.reason);
    });
  });
}

/** @param {Response} resp @param {number} limit @param {string} what */
async function readLimited(resp, limit, what) {
  if (!resp.body) return new Uint8Array();
  const reader = resp.body.getReader();
  /** @type {Uint8Array[]} */
  const chunks = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > limit) {
      await reader.cancel();
      throw new Error(`annal: ${what}: answer is larger than ${limit} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(n);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/**
 * The request a signature states (client.signedForm): the request itself,
 * but for a write to the agent file system, whose body is the file's
 * bytes, the action it is (POST /v1/actions naming the content's OID),
 * which annald states the same way.
 * @param {string} method @param {URL} url @param {unknown} body @param {string | undefined} text
 */
async function signedForm(method, url, body, text) {
  const prefix = "/v1/vfs/";
  if (method !== "PUT" || !(body instanceof Uint8Array) || !url.pathname.startsWith(prefix)) return { method, path: url.pathname, body: text };
  const rest = url.pathname.slice(prefix.length);
  const slash = rest.indexOf("/");
  const p = slash < 0 ? parseVFS(rest, "") : parseVFS(rest.slice(0, slash), rest.slice(slash + 1));
  return vfsWriteRequest(p, body, url.searchParams.get("envelope") ?? undefined);
}

/** A query string of the parameters set in query (a value of undefined or "" is left out). */
function queryString(/** @type {Record<string, unknown>} */ query) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  return q.toString();
}

/**
 * The filters of GET /v1/events (each at most once), its order and paging.
 * @typedef {object} HistoryQuery
 * @property {string} [actor] @property {string} [envelope] @property {string} [session]
 * @property {string} [kind] @property {string} [type] @property {string} [outcome]
 * @property {string} [target] a target prefix
 * @property {string} [since] @property {string} [until] RFC 3339 instants
 * @property {string} [trace_id]
 * @property {"newest" | "oldest"} [order]
 * @property {number | bigint} [cursor] @property {number} [limit]
 */

/**
 * One event of the history: its index, leaf hash and the event as logged
 * (parsed); a sealed payload the kernel still holds, opened, or erased.
 * @typedef {{index: number, leaf_hash: string, event: any, sealed_payload?: unknown, erased?: boolean}} HistoryItem
 */

/** @typedef {{path: string, oid: string, index: number, writer: string, time: string}} VFSFile */
