// The client's default fetch. On Node, a plain-HTTP request goes over
// node:http with a keep-alive Agent, and its answer comes back as a fetch
// Response; everything else (https, other runtimes, NODE_USE_ENV_PROXY)
// goes to globalThis.fetch.
//
// Why: Node's fetch (undici) spends about 250 µs of its own on each request
// to annald on loopback; one sequential agent's submit took p50 611–896 µs
// through it, 354–455 µs through node:http on a kept connection (the same
// run, in turns). node:http keeps connections as fetch does, reuses one
// only once its answer was read to the end, and drops one the server
// closed while it was idle; neither sends a POST again.

/**
 * @typedef {object} NodeHTTP
 * @property {typeof import("node:http").request} request
 * @property {typeof import("node:stream").Readable.toWeb} toWeb
 * @property {import("node:http").Agent} agent
 */

/** @type {Promise<NodeHTTP | null> | undefined} */
let nodeHTTP;

/** node:http and a keep-alive Agent when this runs on Node and uses no proxy from the environment. */
function loadNodeHTTP() {
  nodeHTTP ??= (async () => {
    const proc = /** @type {any} */ (globalThis).process;
    if (!proc?.versions?.node || proc.env?.NODE_USE_ENV_PROXY) return null;
    // Specifiers a bundler for the browser does not try to resolve: this
    // branch runs only on Node.
    const [httpModule, streamModule] = ["node:http", "node:stream"];
    const [http, stream] = await Promise.all([
      import(/* webpackIgnore: true */ /* @vite-ignore */ httpModule),
      import(/* webpackIgnore: true */ /* @vite-ignore */ streamModule),
    ]);
    return { request: http.request, toWeb: stream.Readable.toWeb, agent: new http.Agent({ keepAlive: true, maxFreeSockets: 512 }) };
  })();
  return nodeHTTP;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Answers of a known length up to this are read whole before the Response is made. */
const SMALL_ANSWER = 64 << 10;

/** @param {unknown} reason @returns {Error} */
function abortError(reason) {
  return reason instanceof Error ? reason : new DOMException("This operation was aborted", "AbortError");
}

/**
 * fetch, over node:http for plain HTTP on Node.
 * @param {string | URL} input @param {RequestInit} [init]
 * @returns {Promise<Response>}
 */
export async function keptFetch(input, init = {}) {
  const url = new URL(String(input));
  const node = url.protocol === "http:" ? await loadNodeHTTP() : null;
  const body = init.body;
  if (!node || (body != null && typeof body !== "string" && !(body instanceof Uint8Array))) {
    return globalThis.fetch(input, init);
  }
  const signal = init.signal ?? undefined;
  if (signal?.aborted) throw abortError(signal.reason);
  /** @type {Record<string, string>} */
  const headers = {};
  new Headers(init.headers).forEach((v, k) => {
    headers[k] = v;
  });
  if (body != null) headers["content-length"] = String(Buffer.byteLength(body));
  const method = (init.method ?? "GET").toUpperCase();
  return new Promise((resolve, reject) => {
    /** fails as fetch fails: with the abort's reason, else a TypeError. @param {Error} e */
    const failed = (e) => reject(signal?.aborted ? abortError(signal.reason) : new TypeError("fetch failed", { cause: e }));
    const req = node.request(url, { method, headers, agent: node.agent }, (res) => {
      const out = new Headers();
      for (const [k, v] of Object.entries(res.headers)) {
        if (Array.isArray(v)) for (const x of v) out.append(k, x);
        else if (v !== undefined) out.set(k, v);
      }
      const status = res.statusCode ?? 0;
      if (REDIRECTS.has(status) && res.headers.location && (init.redirect ?? "follow") === "follow") {
        // Redirected (say, by a proxy to https): fetch follows it, as it
        // would have from the start; the server did not act on this one.
        res.resume();
        resolve(globalThis.fetch(input, init));
        return;
      }
      const noBody = method === "HEAD" || status === 204 || status === 304;
      /** @param {BodyInit | null} b */
      const answer = (b) => {
        try {
          resolve(new Response(b, { status, statusText: res.statusMessage, headers: out }));
        } catch (e) {
          res.destroy();
          reject(new TypeError(`annal: ${method} ${url}: the server's answer cannot be read: ${/** @type {Error} */ (e).message}`));
        }
      };
      if (noBody) {
        res.resume();
        answer(null);
        return;
      }
      const length = Number(res.headers["content-length"]);
      if (!(length <= SMALL_ANSWER)) {
        answer(/** @type {ReadableStream} */ (node.toWeb(res))); // streamed as it comes: an event stream, a blob
        return;
      }
      // A small answer of known length, read whole before it is handed on:
      // a web stream over the socket's costs more than the answer.
      /** @type {Buffer[]} */
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.once("end", () => answer(Buffer.concat(chunks)));
      res.once("error", failed);
    });
    const onAbort = () => req.destroy(abortError(signal?.reason));
    signal?.addEventListener("abort", onAbort, { once: true });
    req.once("close", () => signal?.removeEventListener("abort", onAbort));
    req.once("error", failed);
    req.end(body ?? undefined);
  });
}
