// testvectors/events.json: every vector's leaf hash, SHA-256(0x00 || entry),
// and its entry as RFC 8785 canonical JSON, as testvectors/events_test.go
// asserts them. (The rejects need Annal's event parser, which this package
// does not have yet.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { canonicalJSON, leafHash, readEntryJSON } from "@annal/client";
import { concat, fromHex, toHex, utf8, vectors } from "./helpers.js";

const f = vectors("events.json");

test("events.json: every vector's leaf hash is SHA-256(0x00 || entry)", async () => {
  assert.ok(f.vectors.length >= 55);
  for (const v of f.vectors) {
    const entry = utf8.encode(v.entry);
    assert.ok(entry.length <= 65535, v.name);
    const byHand = new Uint8Array(await crypto.subtle.digest("SHA-256", concat(Uint8Array.of(0), entry)));
    assert.equal(toHex(byHand), v.leaf_hash, v.name);
    assert.equal(toHex(await leafHash(entry)), v.leaf_hash, v.name);
  }
});

test("events.json: every vector's entry is the RFC 8785 encoding of its event", () => {
  for (const v of f.vectors) {
    assert.equal(canonicalJSON(JSON.parse(v.entry)), v.entry, v.name);
    assert.equal(canonicalJSON(v.event), v.entry, v.name);
  }
});

// The rejects Annal's reader refuses at the JSON level, before it reads an
// event's fields ("entry: JSON …" and "not in canonical form"). "empty
// trace id" is canonical JSON: Go refuses it because its event encoder
// leaves an empty member out, which is the event parser's part.
const eventLevel = new Set(["empty trace id"]);

test("events.json: every JSON-level reject is refused by readEntryJSON with the Go reader's reason", () => {
  for (const v of f.vectors) readEntryJSON(v.entry);
  const rejects = f.rejects.filter(
    (/** @type {any} */ r) => (r.go_error.startsWith("entry: JSON") || r.go_error.startsWith("entry is not in canonical form")) && !eventLevel.has(r.name),
  );
  assert.equal(rejects.length, 20, `${rejects.length} JSON-level rejects`);
  for (const r of rejects) {
    const entry = fromHex(r.entry_hex);
    assert.throws(
      () => readEntryJSON(entry),
      (/** @type {any} */ e) => {
        if (r.go_error.startsWith("entry: JSON is malformed:")) assert.match(e.message, /^entry: JSON is malformed: /, r.name);
        else assert.equal(e.message, r.go_error, r.name);
        return true;
      },
      r.name,
    );
  }
});
