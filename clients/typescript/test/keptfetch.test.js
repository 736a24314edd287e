// The client's default fetch (src/keptfetch.js) against a local node:http
// server that counts its connections: one kept connection for sequential
// requests, answers small and large, streamed as they come, bodiless ones,
// an abort, a connection the server closed while idle, a redirect left to
// fetch, and https left to fetch.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { keptFetch } from "../src/keptfetch.js";
import { serveLocally } from "./helpers.js";

let connections = 0;
/** @type {Map<string, (req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse) => void>} */
const routes = new Map();
const server = createServer((req, res) => {
  const route = routes.get(new URL(req.url ?? "/", "http://x").pathname);
  if (route) return route(req, res);
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ method: req.method, path: req.url, body }));
  });
});
server.on("connection", () => connections++);
const local = serveLocally(server);

test("keptFetch: sequential requests share one kept connection and get their own answers", async () => {
  const before = connections;
  for (let i = 0; i < 30; i++) {
    const resp = await keptFetch(`${local.url}/echo/${i}`, { method: "POST", body: JSON.stringify({ i }), headers: { "Content-Type": "application/json" } });
    assert.equal(resp.status, 200);
    assert.equal(resp.headers.get("content-type"), "application/json");
    assert.deepEqual(await resp.json(), { method: "POST", path: `/echo/${i}`, body: JSON.stringify({ i }) });
    const got = await keptFetch(new URL(`/echo/${i}?q=1`, local.url));
    assert.equal((await got.json()).path, `/echo/${i}?q=1`);
  }
  assert.equal(connections - before, 1);
});

test("keptFetch: a large answer and a streamed one arrive whole, the streamed one as it is written", async () => {
  const big = "x".repeat(200 << 10);
  routes.set("/big", (_req, res) => {
    res.writeHead(200, { "Content-Length": String(big.length) });
    res.end(big);
  });
  assert.equal(await (await keptFetch(`${local.url}/big`)).text(), big);

  /** @type {() => void} */
  let next = () => {};
  routes.set("/events", (_req, res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write("data: 0\n\n");
    next = () => res.end("data: 1\n\n");
  });
  const resp = await keptFetch(`${local.url}/events`);
  const reader = /** @type {ReadableStream<Uint8Array>} */ (resp.body).getReader();
  const first = await reader.read(); // arrives while the server still holds the rest
  assert.equal(new TextDecoder().decode(first.value), "data: 0\n\n");
  next();
  let rest = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    rest += new TextDecoder().decode(value);
  }
  assert.equal(rest, "data: 1\n\n");
});

test("keptFetch: 204 and HEAD answers have no body", async () => {
  routes.set("/empty", (_req, res) => {
    res.writeHead(204);
    res.end();
  });
  const empty = await keptFetch(`${local.url}/empty`, { method: "DELETE" });
  assert.equal(empty.status, 204);
  assert.equal(empty.body, null);
  const head = await keptFetch(`${local.url}/echo`, { method: "HEAD" });
  assert.equal(head.status, 200);
  assert.equal(head.body, null);
  assert.equal((await (await keptFetch(`${local.url}/after`)).json()).path, "/after");
});

test("keptFetch: an abort ends a request the server has not answered, and the next one is answered", async () => {
  routes.set("/hang", () => {}); // never answers
  const ctl = new AbortController();
  setTimeout(() => ctl.abort(), 50);
  await assert.rejects(keptFetch(`${local.url}/hang`, { signal: ctl.signal }), { name: "AbortError" });
  const aborted = new AbortController();
  aborted.abort();
  await assert.rejects(keptFetch(`${local.url}/echo`, { signal: aborted.signal }), { name: "AbortError" });
  assert.equal((await (await keptFetch(`${local.url}/after-abort`)).json()).path, "/after-abort");
});

test("keptFetch: a connection the server closed while idle is not used again", async () => {
  routes.set("/close-after", (_req, res) => {
    res.writeHead(200, { "Content-Length": "2" });
    res.end("ok", () => setTimeout(() => res.socket?.end(), 10)); // the server ends the idle connection
  });
  assert.equal(await (await keptFetch(`${local.url}/close-after`)).text(), "ok");
  await new Promise((r) => setTimeout(r, 100));
  const resp = await keptFetch(`${local.url}/echo/again`, { method: "POST", body: "{}" });
  assert.deepEqual(await resp.json(), { method: "POST", path: "/echo/again", body: "{}" });
});

test("keptFetch: a redirect and https are fetch's", async () => {
  routes.set("/moved", (_req, res) => {
    res.writeHead(308, { Location: "/echo/moved-here" });
    res.end();
  });
  const real = globalThis.fetch;
  /** @type {string[]} */
  const toFetch = [];
  globalThis.fetch = async (input, init) => {
    toFetch.push(String(input));
    return real(input, init);
  };
  try {
    const moved = await keptFetch(`${local.url}/moved`);
    assert.equal(moved.status, 200);
    assert.equal((await moved.json()).path, "/echo/moved-here");
    await assert.rejects(keptFetch("https://127.0.0.1:1/v1/health"));
  } finally {
    globalThis.fetch = real;
  }
  assert.deepEqual(toFetch, [`${local.url}/moved`, "https://127.0.0.1:1/v1/health"]);
});
