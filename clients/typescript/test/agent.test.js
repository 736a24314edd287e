// The agent's calls beyond submit, against a real annald: who it is, its
// budget and envelopes, holds, history and the live stream with resume,
// blobs, the agent file system (signed writes too), sealed payloads read
// back and erased; each refusal an AnnalError with stage and gate.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { AnnalClient, AnnalError, canonicalJSON, generateSigningKey, leafHash, toHex, verifyDeltaChain, VFSPathError } from "@annal/client";
import { startAnnald } from "./annald.js";

/** @type {Awaited<ReturnType<typeof startAnnald>>} */
let annald;
/** @type {AnnalClient} */
let root;
/** @type {AnnalClient} */
let agent;
/** @type {{id: string, credential: string}} */
let me;
/** @type {{id: string}} */
let env;

const grants = [{ pattern: "workspace/**", actions: ["create", "mutate", "observe"] }];

before(async () => {
  annald = await startAnnald(["--keep-blobs"]);
  if (!annald) return;
  root = new AnnalClient(annald.url, { credential: annald.rootCredential });
  me = await root.createAgent({ name: "reader", purpose: "reads its own history", energy: 5000, trust: 0.8, grants });
  env = await root.issueEnvelope({ holder: me.id, budget: 1000, grants, hold_on: [{ pattern: "workspace/held/*", actions: ["mutate"] }] });
  agent = new AnnalClient(annald.url, { credential: me.credential });
});

after(async () => {
  await annald?.stop();
});

const skip = "go is not installed (set ANNALD or install go)";

/** The AnnalError a promise is refused with. @param {Promise<unknown>} p */
async function refusal(p) {
  const e = await p.then(
    () => assert.fail("the kernel allowed it"),
    (/** @type {unknown} */ e) => e,
  );
  assert.ok(e instanceof AnnalError, String(e));
  return e;
}

test("agent: whoAmI, actor and actors name the client's actor; a stranger's record is refused", async (t) => {
  if (!annald) return t.skip(skip);
  const w = await agent.whoAmI();
  assert.equal(w.id, me.id);
  assert.equal(w.kind, "agent");
  assert.equal(w.status, "active");
  assert.equal((await agent.actor(me.id)).name, "reader");
  const all = await root.actors();
  assert.ok(all.some((/** @type {any} */ a) => a.id === me.id), "root does not see the agent it created");
  const e = await refusal(agent.actor("root"));
  assert.ok(e.status === 403 || e.status === 404, String(e.status));
});

test("agent: budget shows the envelope's remaining energy, which an action spends", async (t) => {
  if (!annald) return t.skip(skip);
  const before = await agent.budget();
  assert.equal(before.actor, me.id);
  const mine = before.envelopes.find((v) => v.id === env.id);
  assert.ok(mine, "the agent's envelope is not in its budget");
  assert.equal(mine.budget, 1000);
  const r = await agent.submit({ type: "create", target: "workspace/budget.md", payload: { n: 1 } });
  const afterIt = await agent.budget();
  const now = /** @type {any} */ (afterIt.envelopes.find((v) => v.id === env.id));
  assert.equal(now.remaining, mine.remaining - r.cost);
  assert.ok(r.cost > 0);
  assert.deepEqual((await agent.envelope(env.id)).id, env.id);
  assert.ok((await agent.envelopes()).some((/** @type {any} */ v) => v.id === env.id));
});

test("agent: an envelope revoked stops the actions under it, with the denial's stage, gate and index", async (t) => {
  if (!annald) return t.skip(skip);
  const other = await root.issueEnvelope({ holder: me.id, budget: 100, grants: [{ pattern: "workspace/scratch/**", actions: ["create"] }] });
  const ok = await agent.submit({ type: "create", target: "workspace/scratch/a", payload: 1, envelope: other.id });
  assert.equal(ok.status, "committed");
  const rv = await root.revokeEnvelope(other.id, "done with scratch");
  assert.equal(typeof rv.index, "number");
  assert.equal((await agent.envelope(other.id)).revoked, true);
  const e = await refusal(agent.submit({ type: "create", target: "workspace/scratch/b", payload: 2, envelope: other.id }));
  assert.equal(e.status, 403);
  assert.ok(e.stage && e.gate, `stage ${e.stage} gate ${e.gate}`);
  assert.equal(typeof e.denialIndex, "number");
  // Only its issuer (or root) may revoke it: the agent is refused.
  const e2 = await refusal(agent.revokeEnvelope(env.id, "not mine to revoke"));
  assert.ok(e2.status >= 400 && e2.status < 500, String(e2.status));
});

test("agent: holds lists a held action as pending, then approved", async (t) => {
  if (!annald) return t.skip(skip);
  const r = await agent.submit({ type: "mutate", target: "workspace/held/plan", payload: { go: 1 } });
  assert.equal(r.status, "held");
  const pending = await agent.holds("pending");
  assert.ok(pending.some((/** @type {any} */ h) => h.id === r.hold_id), "the held action is not pending");
  await root.answerHold(/** @type {string} */ (r.hold_id), "approve");
  assert.ok(!(await agent.holds("pending")).some((/** @type {any} */ h) => h.id === r.hold_id));
  assert.ok((await agent.holds()).some((/** @type {any} */ h) => h.id === r.hold_id && h.status === "approved"));
  assert.ok((await agent.holds("approved")).every((/** @type {any} */ h) => h.status === "approved"));
});

test("agent: history pages with filters, order and cursor, each event's leaf hash its own", async (t) => {
  if (!annald) return t.skip(skip);
  const targets = ["workspace/h/1", "workspace/h/2", "workspace/h/3"];
  const receipts = [];
  for (const target of targets) receipts.push(await agent.submit({ type: "create", target, payload: { target } }));
  const page = await agent.history({ actor: me.id, target: "workspace/h/", order: "oldest", limit: 2 });
  assert.deepEqual(page.events.map((it) => it.index), receipts.slice(0, 2).map((r) => r.index));
  assert.equal(typeof page.next_cursor, "number");
  const next = await agent.history({ actor: me.id, target: "workspace/h/", order: "oldest", limit: 2, cursor: page.next_cursor });
  assert.deepEqual(next.events.map((it) => it.index), [receipts[2].index]);
  for (const it of [...page.events, ...next.events]) {
    assert.equal(toHex(await leafHash(new TextEncoder().encode(canonicalJSON(it.event)))), it.leaf_hash);
  }
  const newest = await agent.history({ target: "workspace/h/", limit: 1 });
  assert.equal(newest.events[0].index, receipts[2].index);
  const e = await refusal(agent.history({ order: /** @type {any} */ ("sideways") }));
  assert.equal(e.status, 400);
  assert.match(e.kernelMessage, /order/);
});

test("agent: the live stream resumes after the last index seen, without gap or repeat", async (t) => {
  if (!annald) return t.skip(skip);
  const start = (await agent.history({ limit: 1 })).events[0].index;
  const logged = [];
  for (let i = 0; i < 6; i++) logged.push((await agent.submit({ type: "create", target: `workspace/s/${i}`, payload: { i } })).index);
  // Read three, stop.
  const seen = [];
  for await (const it of agent.stream({ actor: me.id, target: "workspace/s/" }, { after: start })) {
    seen.push(it.index);
    if (seen.length === 3) break;
  }
  assert.deepEqual(seen, logged.slice(0, 3));
  // Resume after the last one seen: the next three, then one logged live.
  const ac = new AbortController();
  const resumed = /** @type {number[]} */ ([]);
  const reading = (async () => {
    for await (const it of agent.stream({ actor: me.id, target: "workspace/s/" }, { after: seen[2], signal: ac.signal })) {
      resumed.push(it.index);
      if (resumed.length === 4) ac.abort();
    }
  })();
  while (resumed.length < 3) await new Promise((r) => setTimeout(r, 20));
  const live = await agent.submit({ type: "create", target: "workspace/s/live", payload: {} });
  await reading; // the abort ends the iteration, without an error
  assert.deepEqual(resumed, [...logged.slice(3), live.index]);
  // A stream the kernel refuses before it starts is an AnnalError.
  const e = await refusal((async () => {
    for await (const _ of agent.stream(/** @type {any} */ ({ limit: 3 }))) break;
  })());
  assert.equal(e.status, 400);
});

test("agent: the stream reconnects when the connection drops, from the last index it yielded", async (t) => {
  if (!annald) return t.skip(skip);
  const base = (await agent.history({ limit: 1 })).events[0].index;
  const logged = [];
  for (let i = 0; i < 4; i++) logged.push((await agent.submit({ type: "create", target: `workspace/r/${i}`, payload: { i } })).index);
  // A fetch that cuts the first connection after one event; the rest pass.
  const asked = /** @type {(string | null)[]} */ ([]);
  const cutting = /** @type {typeof fetch} */ (async (input, init) => {
    asked.push(new Headers(init?.headers).get("Last-Event-ID"));
    const resp = await fetch(input, init);
    if (asked.length > 1 || !resp.body) return resp;
    const reader = resp.body.getReader();
    let text = "";
    const body = new ReadableStream({
      async pull(c) {
        const { value, done } = await reader.read();
        if (done) return c.close();
        text += new TextDecoder().decode(value);
        const cut = text.indexOf("\n\n");
        if (cut >= 0) {
          c.enqueue(new TextEncoder().encode(text.slice(0, cut + 2)));
          await reader.cancel();
          c.error(new TypeError("connection reset"));
        }
      },
    });
    return new Response(body, { status: resp.status, headers: resp.headers });
  });
  const c = new AnnalClient(annald.url, { credential: me.credential, fetch: cutting });
  const got = [];
  for await (const it of c.stream({ target: "workspace/r/" }, { after: base, reconnectMs: 10 })) {
    got.push(it.index);
    if (got.length === 4) break;
  }
  assert.deepEqual(got, logged);
  assert.deepEqual(asked, [String(base), String(logged[0])]);
});

test("agent: putBlob returns the content's OID, and blob checks the bytes against it; an agent may not read blobs", async (t) => {
  if (!annald) return t.skip(skip);
  const data = new TextEncoder().encode("the report, in full\n");
  const id = await agent.putBlob(data);
  assert.equal(id, "sha256:" + toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", data))));
  assert.deepEqual(await root.blob(id), data);
  const e = await refusal(agent.blob(id));
  assert.equal(e.status, 403);
  // A store that answers other bytes than the id's is caught.
  const lying = new AnnalClient(annald.url, {
    credential: annald.rootCredential,
    fetch: /** @type {typeof fetch} */ (async () => new Response("other bytes")),
  });
  await assert.rejects(lying.blob(id), /the bytes served hash to sha256:/);
});

test("agent: the agent file system: vfsPut, vfsList and vfsRead, with views and refusals", async (t) => {
  if (!annald) return t.skip(skip);
  const uri = `vfs://${me.id}/mem/working/notes.md`;
  const w = await agent.vfsPut(uri, "remember the milk\n");
  assert.equal(w.receipt.status, "committed");
  assert.equal(w.size, 18);
  const l = await agent.vfsList(`vfs://${me.id}/mem/working/`);
  const f = l.files.find((x) => x.path === "mem/working/notes.md");
  assert.ok(f);
  assert.equal(f.oid, w.oid);
  assert.equal(f.index, w.receipt.index);
  const { data, file } = await agent.vfsRead(uri);
  assert.equal(new TextDecoder().decode(data), "remember the milk\n");
  assert.equal(file?.oid, w.oid);
  // The write is in the log as an action naming the content's OID.
  const ev = JSON.parse(new TextDecoder().decode(await agent.event(w.receipt.index)));
  assert.equal(ev.action.target, `vfs/${me.id}/mem/working/notes.md`);
  assert.equal(ev.action.payload_hash, w.oid);
  // A view of the log.
  const audit = new TextDecoder().decode((await agent.vfsRead(`vfs://${me.id}/audit/events.jsonl`)).data);
  assert.ok(audit.split("\n").some((line) => line.includes(`"index":${w.receipt.index},`)));
  // Refused before anything is sent: a path outside the tree, a view, a directory.
  await assert.rejects(agent.vfsPut(`vfs://${me.id}/tmp/x`, "x"), VFSPathError);
  await assert.rejects(agent.vfsPut(`vfs://${me.id}/policy/active.json`, "x"), /read-only/);
  await assert.rejects(agent.vfsRead(`vfs://${me.id}/mem/working`), /is a directory/);
  await assert.rejects(agent.vfsRead(`vfs://${me.id}/mem/working/absent`), /no such file/);
  // Another agent's tree is refused by the kernel.
  const e = await refusal(agent.vfsPut(`vfs://root/mem/working/x`, "x"));
  assert.ok(e.status >= 400 && e.status < 500, String(e.status));
});

test("agent: a signing client's file write is signed with the action it is, and verified by the kernel", async (t) => {
  if (!annald) return t.skip(skip);
  const { verifierKey, key } = await generateSigningKey("vfs-signer");
  const a = await root.createAgent({ name: "vfs-signer", purpose: "signs its writes", energy: 2000, trust: 0.8, grants,
    signing_key: verifierKey, require_signed: true });
  const ev1 = await root.issueEnvelope({ holder: a.id, budget: 500, grants });
  const signed = new AnnalClient(annald.url, { credential: a.credential, signingKey: key });
  const w = await signed.vfsPut(`vfs://${a.id}/mem/semantic/facts.md`, "two cores\n", { envelope: ev1.id });
  const ev = JSON.parse(new TextDecoder().decode(await signed.event(w.receipt.index)));
  assert.equal(ev.signed.by, a.id);
  assert.equal(ev.signed.key, key.keyId);
  assert.equal(ev.action.envelope, ev1.id);
  // Unsigned, the same actor's write is refused.
  const unsigned = new AnnalClient(annald.url, { credential: a.credential });
  await refusal(unsigned.vfsPut(`vfs://${a.id}/mem/semantic/facts.md`, "three cores\n"));
});

test("agent: a sealed payload reads back through history and the stream, and is gone once its subject is erased", async (t) => {
  if (!annald) return t.skip(skip);
  const subject = `subject-${Date.now()}`;
  const r = await agent.submit({ type: "create", target: "workspace/crm/1", payload: { name: "Ada" }, seal: true, subject });
  const ev = JSON.parse(new TextDecoder().decode(await agent.event(r.index)));
  assert.equal(ev.action.payload, undefined);
  assert.equal(ev.action.sealed.subject, subject);
  const item = (await agent.history({ target: "workspace/crm/1", limit: 1 })).events[0];
  assert.equal(item.index, r.index);
  assert.deepEqual(item.sealed_payload, { name: "Ada" });
  for await (const it of agent.stream({ target: "workspace/crm/1" }, { after: r.index - 1 })) {
    assert.deepEqual(it.sealed_payload, { name: "Ada" });
    break;
  }
  // Erasure is a human's: the agent is refused, root erases.
  const e = await refusal(agent.eraseSubject(subject, "asked to be forgotten"));
  assert.ok(e.status === 403 || e.status === 401, String(e.status));
  const er = await root.eraseSubject(subject, "asked to be forgotten");
  assert.equal(typeof er.index, "number");
  const gone = (await agent.history({ target: "workspace/crm/1", limit: 1 })).events[0];
  assert.equal(gone.sealed_payload, undefined);
  assert.equal(gone.erased, true);
  // The entry is unchanged: its proof still verifies.
  const { result } = await agent.fetchAndVerify(r.index, annald.verifierKey);
  assert.equal(toHex(result.leafHash), r.leaf_hash);
});

test("agent: a session's turns recorded as deltas, and its chain read back verified", async (t) => {
  if (!annald) return t.skip(skip);
  const sg = [{ pattern: "sessions/**", actions: ["mutate"] }];
  const a = await root.createAgent({ name: "scribe", purpose: "records its turns", energy: 1000, trust: 0.8, grants: sg });
  await root.issueEnvelope({ holder: a.id, budget: 500, grants: sg });
  const scribe = new AnnalClient(annald.url, { credential: a.credential });
  const id = `s-${Date.now()}`;
  await root.createSession({ id, config: { isolation: "READ_COMMITTED" } });
  await root.changeSession(id, { op: "state", state: "HANDSHAKING" });
  await scribe.changeSession(id, { op: "join" });
  await root.changeSession(id, { op: "state", state: "ACTIVE" });
  const h = "sha256:" + "ab".repeat(32);
  const t1 = await scribe.appendDelta(id, "t1", [{ path: "a.txt", operation: "create", content_hash: h }]);
  const t2 = await scribe.appendDelta(id, "t2", [{ path: "a.txt", operation: "delete" }]);
  const chain = await scribe.deltas(id);
  assert.deepEqual(chain.map((c) => c.index), [t1.receipt.index, t2.receipt.index]);
  assert.equal(chain[0].delta.parent_hash, "0".repeat(64));
  assert.equal(chain[1].delta.parent_hash, chain[0].delta.delta_hash);
  // The chain's entries, from the log, verify offline as one chain.
  const entries = await Promise.all(chain.map((c) => scribe.event(c.index)));
  const v = await verifyDeltaChain(entries);
  assert.equal(v.head, chain[1].delta.delta_hash);
  // A delta out of the session's rules is refused with stage and gate.
  const e = await refusal(scribe.appendDelta(id, "t1", [{ path: "b.txt", operation: "create", content_hash: h }]));
  assert.ok(e.status >= 400 && e.status < 500, String(e.status));
  // A chain whose delta was changed in transit is refused. (Its changes, kept
  // for a time beside their commitment, are not covered by the hash, and the
  // API gives no salt to check them against it: the turn id is.)
  const lying = new AnnalClient(annald.url, {
    credential: a.credential,
    fetch: /** @type {typeof fetch} */ (async (input, init) => {
      const resp = await fetch(input, init);
      const text = (await resp.text()).replace('"turn_id":"t1"', '"turn_id":"t9"');
      return new Response(text, { status: resp.status, headers: resp.headers });
    }),
  });
  await assert.rejects(lying.deltas(id), { check: "delta chain" });
});

test("agent: mayEver says which actions could ever be allowed; setSigningKey makes the agent's later requests need its key", async (t) => {
  if (!annald) return t.skip(skip);
  const answers = await agent.mayEver([{ type: "create", target: "workspace/x" }, { type: "create", target: "mail/outbox/1" }]);
  assert.equal(answers[0].allowed, true);
  assert.equal(answers[1].allowed, false);
  assert.ok(answers[1].gate);
  const a = await root.createAgent({ name: "rotator", purpose: "registers its key", energy: 1000, trust: 0.8, grants });
  await root.issueEnvelope({ holder: a.id, budget: 500, grants });
  const { verifierKey, key } = await generateSigningKey("rotator-key");
  const plain = new AnnalClient(annald.url, { credential: a.credential });
  const rk = await plain.setSigningKey(a.id, { key: verifierKey, require_signed: true, reason: "from now on" });
  assert.equal(typeof rk.index, "number");
  assert.equal((await plain.whoAmI()).signing_key, verifierKey);
  await refusal(plain.submit({ type: "create", target: "workspace/unsigned", payload: 1 }));
  const signed = new AnnalClient(annald.url, { credential: a.credential, signingKey: key });
  assert.equal((await signed.submit({ type: "create", target: "workspace/signed", payload: 1 })).status, "committed");
});

test("agent: actors and envelopes read every page of a list longer than one page", async (t) => {
  if (!annald) return t.skip(skip);
  const made = [];
  for (let batch = 0; batch < 21; batch++) {
    const ids = await Promise.all(
      Array.from({ length: 10 }, (_, i) => root.createAgent({ name: `page${batch}-${i}`, purpose: "paging" }).then((a) => a.id)),
    );
    made.push(...ids);
  }
  const all = /** @type {any[]} */ (await root.actors());
  const ids = all.map((a) => a.id);
  assert.equal(new Set(ids).size, ids.length, "an actor came back twice");
  assert.ok(ids.length > 200, `only ${ids.length} actors: the client read one page`);
  for (const id of made) assert.ok(ids.includes(id), `actor ${id} is missing from the list`);
  assert.deepEqual([...ids].sort(), ids, "the pages are not in the list's order");
});
