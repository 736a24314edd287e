// testvectors/vfs.json: every write's target, type, OID, the request its
// signature states, and the entry and leaf hash the log records for it;
// every refused URI refused with Annal's parser's message.
import { test } from "node:test";
import assert from "node:assert/strict";
import { VFSPathError, canonicalJSON, leafHash, oidOf, parseVFSURI, toHex, vfsWriteRequest } from "@annal/client";
import { vectors } from "./helpers.js";

const v = vectors("vfs.json");

test("vfs.json: each write's target, type, OID, signed request, entry and leaf hash", async () => {
  assert.ok(v.writes.length >= 4);
  for (const w of v.writes) {
    const p = parseVFSURI(w.uri);
    p.checkWritable();
    assert.equal(p.target, w.target, w.name);
    assert.equal(p.writeType, w.type, w.name);
    assert.equal(p.uri, w.uri, w.name);
    const content = new TextEncoder().encode(w.content);
    assert.equal(await oidOf(content), w.oid, w.name);
    const req = await vfsWriteRequest(p, content, w.envelope);
    assert.equal(canonicalJSON({ ...req, body: JSON.parse(req.body) }), w.signed_request, w.name);
    const entry = canonicalJSON({
      action: { envelope: w.envelope, payload_hash: await oidOf(content), target: p.target, type: p.writeType },
      actor: w.actor,
      decision: { cost: w.cost, outcome: "committed", reserved: w.cost, settled: w.cost },
      id: w.id,
      kind: "action",
      time: w.time,
      v: 1,
    });
    assert.equal(entry, w.entry, w.name);
    assert.equal(toHex(await leafHash(new TextEncoder().encode(entry))), w.leaf_hash, w.name);
  }
});

test("vfs.json: every refused URI is refused, with the message of Annal's parser", () => {
  assert.ok(v.refused.length >= 8);
  for (const r of v.refused) {
    assert.throws(() => parseVFSURI(r.uri), (/** @type {any} */ e) => {
      assert.ok(e instanceof VFSPathError, r.name);
      assert.equal(e.message, r.error, r.name);
      return true;
    });
  }
});

test("vfs paths: directories, views and the outbox are read-only; a name of 9 segments or 129 bytes is refused", () => {
  for (const uri of ["vfs://agent-a/", "vfs://agent-a/mem/working", "vfs://agent-a/policy/active.json", "vfs://agent-a/ipc/outbox/agent-b/x"]) {
    assert.throws(() => parseVFSURI(uri).checkWritable(), /read-only/, uri);
  }
  assert.equal(parseVFSURI("vfs://agent-a/mem/working/").isDir, true);
  assert.equal(parseVFSURI("vfs://agent-a/ipc/inbox/m-1").writeType, "create");
  assert.throws(() => parseVFSURI("vfs://agent-a/mem/working/" + Array(9).fill("a").join("/")), /9 segments/);
  assert.throws(() => parseVFSURI("vfs://agent-a/mem/working/" + "a".repeat(129)), /more than 128/);
  assert.throws(() => parseVFSURI("vfs://agent-a/mem/working/\u00e9"), /holds '\u00c3'/);
});
