// How the client reads the event stream's bytes, against a small local
// server that speaks what annald's handleStream writes: keep-alive
// comments skipped, CRLF lines, an "event: error" ending the stream with
// the kernel's message, an abort ending it quietly. (Resume against annald
// itself is in agent.test.js.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { AnnalClient, AnnalError } from "@annal/client";
import { serveLocally } from "./helpers.js";

/** @type {string[]} */
let lastEventIDs = [];
/** @type {(res: import("node:http").ServerResponse) => void} */
let answer = () => {};
const server = createServer((req, res) => {
  lastEventIDs.push(String(req.headers["last-event-id"] ?? ""));
  answer(res);
});
const local = serveLocally(server);

const item = (/** @type {number} */ i) => JSON.stringify({ index: i, leaf_hash: "00", event: { kind: "action", n: i } });

test("stream: comments are skipped, CRLF lines read, and an event: error ends the stream with the kernel's message", async () => {
  lastEventIDs = [];
  answer = (res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.end(`id: 4\r\nevent: event\r\ndata: ${item(4)}\r\n\r\n: keep-alive\n\nid: 5\nevent: event\ndata: ${item(5)}\n\nevent: error\ndata: "annal: forbidden: \\"agent-b\\" no longer oversees agent-c"\n\n`);
  };
  const got = /** @type {number[]} */ ([]);
  const err = await (async () => {
    for await (const it of new AnnalClient(local.url).stream({}, { after: 3 })) got.push(it.index);
  })().then(
    () => assert.fail("the stream ended without the error"),
    (/** @type {unknown} */ e) => e,
  );
  assert.deepEqual(got, [4, 5]);
  assert.ok(err instanceof AnnalError);
  assert.equal(err.kernelMessage, 'annal: forbidden: "agent-b" no longer oversees agent-c');
  assert.deepEqual(lastEventIDs, ["3"]);
});

test("stream: a connection the server ends is reopened from the last index; an abort ends the iteration quietly", async () => {
  lastEventIDs = [];
  let n = 10;
  answer = (res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    n++;
    res.end(`id: ${n}\nevent: event\ndata: ${item(n)}\n\n`); // one event, then the connection ends
  };
  const ac = new AbortController();
  const got = [];
  for await (const it of new AnnalClient(local.url).stream({ kind: "action" }, { signal: ac.signal, reconnectMs: 5 })) {
    got.push(it.index);
    if (got.length === 3) ac.abort();
  }
  assert.deepEqual(got, [11, 12, 13]);
  assert.deepEqual(lastEventIDs.slice(0, 3), ["", "11", "12"]);
});

test("stream: a refusal before the stream starts is an AnnalError with the kernel's fields", async () => {
  answer = (res) => {
    res.writeHead(400, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ error: "invalid: a stream takes no limit" }));
  };
  await assert.rejects(
    (async () => {
      for await (const _ of new AnnalClient(local.url).stream(/** @type {any} */ ({ limit: 1 }))) break;
    })(),
    (/** @type {any} */ e) => e instanceof AnnalError && e.status === 400 && e.kernelMessage === "invalid: a stream takes no limit",
  );
});
