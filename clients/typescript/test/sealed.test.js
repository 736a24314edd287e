// testvectors/sealed.json: every commitment (salt, RFC 8785 payload,
// commitment) and every event's entry, as testvectors/sealed_test.go
// asserts them. (Its rejects are audit bundles, which this package does not
// read yet.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { canonicalJSON, readEntryJSON, sealCommitment } from "@annal/client";
import { fromHex, vectors } from "./helpers.js";

const f = vectors("sealed.json");

test("sealed.json: every commitment", async () => {
  assert.ok(f.commitments.length >= 2);
  for (const c of f.commitments) {
    assert.equal(canonicalJSON(c.payload), c.canonical, c.name);
    assert.equal(await sealCommitment(fromHex(c.salt_hex), c.payload), c.commitment, c.name);
    // Another salt, another commitment.
    assert.notEqual(await sealCommitment(new Uint8Array(32).fill(7), c.payload), c.commitment, c.name);
  }
  await assert.rejects(sealCommitment(new Uint8Array(31), "x"), /31 bytes/);
});

test("sealed.json: every event's entry is its RFC 8785 encoding, and the action carries the first commitment", () => {
  assert.ok(f.events.length >= 3);
  for (const e of f.events) {
    assert.equal(canonicalJSON(e.event), e.entry, e.name);
    readEntryJSON(e.entry);
  }
  assert.equal(f.events[0].event.action.sealed.commitment, f.commitments[0].commitment);
});
