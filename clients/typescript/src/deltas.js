// Delta chains (ADR-0023; testvectors/FORMATS.md, "Delta chains"): a
// session's session.delta events, each delta hashed as
// hex(SHA-256(raw(parent_hash) || JCS(delta without delta_hash))) and
// linked to the one before by parent_hash, the first to the zero hash.
// The checks and messages of Annal's Go verifier (verifier/deltachain.go).

import { canonicalJSON } from "./canonical.js";
import { abbreviate, concat, fromHex, goQuote, toHex, utf8 } from "./encoding.js";
import { readEntryJSON } from "./entry.js";
import { VerificationError } from "./errors.js";
import { sha256 } from "./note.js";

export const ZERO_DELTA_HASH = "0".repeat(64);
const DELTA_KIND = "session.delta";

// A delta's members, each with whether it is a string; delta_hash covers
// all but itself. Exactly one of changes (an array) and sealed (an object).
const MEMBERS = new Map([
  ["agent_did", true], ["changes", false], ["delta_hash", true], ["delta_id", true],
  ["parent_hash", true], ["session_id", true], ["timestamp", true], ["turn_id", true], ["sealed", false],
]);

const isLowerHex64 = (/** @type {unknown} */ s) => typeof s === "string" && /^[0-9a-f]{64}$/.test(s);
const ab = (/** @type {string} */ s) => abbreviate(s, 80);

/**
 * A delta's delta_hash, computed from its members (a delta object, or its JSON).
 * @param {Record<string, unknown> | string} delta
 */
export async function deltaHash(delta) {
  const members = typeof delta === "string" ? JSON.parse(delta) : { ...delta };
  if (!members || typeof members !== "object" || Array.isArray(members)) throw new Error("delta is not a JSON object");
  if (!isLowerHex64(members.parent_hash)) throw new Error("delta parent_hash is not 64 lower-case hex digits");
  delete members.delta_hash;
  return toHex(await sha256(concat(fromHex(members.parent_hash), utf8.encode(canonicalJSON(members)))));
}

/**
 * The delta of a session.delta event, checked on its own: exactly the
 * delta's members, hashes of 64 lower-case hex digits, delta_hash
 * recomputing, and session_id, agent_did and timestamp the event's.
 * @param {any} ev a parsed event
 * @returns {Promise<{id: string, session: string, parentHash: string, deltaHash: string}>}
 */
export async function checkDeltaEvent(ev) {
  if (ev.kind !== DELTA_KIND) throw new Error(`event ${ev.id} is a ${ev.kind}, not a ${DELTA_KIND}`);
  if (typeof ev.session !== "string") throw new Error(`${DELTA_KIND} event ${ev.id} has no session`);
  const d = ev.delta;
  if (!d || typeof d !== "object" || Array.isArray(d)) throw new Error(`${DELTA_KIND} event ${ev.id} has no delta object`);
  checkMembers(ev.id, d);
  const link = { id: d.delta_id, session: d.session_id, parentHash: d.parent_hash, deltaHash: d.delta_hash };
  if (!isLowerHex64(link.parentHash)) throw new Error(`delta ${link.id}: parent_hash ${goQuote(ab(link.parentHash))} is not 64 lower-case hex digits`);
  if (!isLowerHex64(link.deltaHash)) throw new Error(`delta ${link.id}: delta_hash ${goQuote(ab(link.deltaHash))} is not 64 lower-case hex digits`);
  if (link.session !== ev.session) {
    throw new Error(`delta ${link.id}: session_id ${goQuote(ab(link.session))} is not the event's session ${goQuote(ab(ev.session))}`);
  }
  if (d.agent_did !== ev.actor) throw new Error(`delta ${link.id}: agent_did ${goQuote(ab(d.agent_did))} is not the event's actor ${goQuote(ev.actor)}`);
  if (d.timestamp !== ev.time) throw new Error(`delta ${link.id}: timestamp ${goQuote(ab(d.timestamp))} is not the event's time ${ev.time}`);
  const h = await deltaHash(d);
  if (h !== link.deltaHash) throw new Error(`delta ${link.id}: delta_hash ${link.deltaHash} is not the hash of its members, ${h}`);
  return link;
}

/** @param {string} id @param {Record<string, unknown>} d */
function checkMembers(id, d) {
  for (const name of Object.keys(d).sort()) {
    const isString = MEMBERS.get(name);
    if (isString === undefined) throw new Error(`event ${id}: delta has the unknown member ${goQuote(name)}`);
    const v = d[name];
    if (isString && typeof v !== "string") throw new Error(`event ${id}: delta ${name} is not a string`);
    if (name === "changes" && !Array.isArray(v)) throw new Error(`event ${id}: delta changes is not an array`);
    if (name === "sealed" && (!v || typeof v !== "object" || Array.isArray(v))) throw new Error(`event ${id}: delta sealed is not an object`);
  }
  for (const [name, isString] of [...MEMBERS].sort()) {
    if (isString && !(name in d)) throw new Error(`event ${id}: delta lacks ${goQuote(name)}`);
  }
  if (("changes" in d) === ("sealed" in d)) throw new Error(`event ${id}: delta has changes or sealed (a commitment to them), exactly one`);
  if ("sealed" in d) {
    const why = sealedProblem(/** @type {Record<string, unknown>} */ (d.sealed), /** @type {string} */ (d.delta_id));
    if (why) throw new Error(`event ${id}: delta sealed: ${why}`);
  }
}

/** What is wrong with a delta's sealed member, if anything. @param {Record<string, unknown>} s @param {string} deltaID */
function sealedProblem(s, deltaID) {
  if (Object.keys(s).length !== 3) return "not an object of subject, commitment and retain_until";
  for (const name of ["subject", "commitment", "retain_until"]) {
    if (typeof s[name] !== "string") return `${name} is not a string`;
  }
  const subject = /** @type {string} */ (s.subject);
  const commitment = /** @type {string} */ (s.commitment);
  if (subject !== "delta:" + deltaID) return `subject ${goQuote(ab(subject))} is not "delta:" and the delta's id`;
  if (!commitment.startsWith("sha256:") || !isLowerHex64(commitment.slice(7))) {
    return `commitment ${goQuote(ab(commitment))} is not sha256:<64 lower-case hex>`;
  }
  return "";
}

/**
 * Verifies session.delta event entries, in log order, as one session's
 * chain: each entry canonical JSON, each delta's hash recomputing, each
 * parent_hash the previous delta_hash; with complete (the default), the
 * first parent is the zero hash. Throws a VerificationError of check
 * "entry" or "delta chain" with the Go verifier's message.
 * @param {(string | Uint8Array)[]} entries
 * @param {boolean} [complete]
 */
export async function verifyDeltaChain(entries, complete = true) {
  /** @type {Map<string, {session: string, deltas: number, complete: boolean, firstParent: string, head: string, lastIndex: number}>} */
  const bySession = new Map();
  for (const [i, entry] of entries.entries()) {
    /** @type {any} */
    let ev;
    try {
      ev = readEntryJSON(entry);
    } catch (e) {
      throw new VerificationError("entry", `delta ${i + 1}: ${/** @type {Error} */ (e).message}`);
    }
    let d;
    try {
      d = await checkDeltaEvent(ev);
    } catch (e) {
      throw new VerificationError("delta chain", /** @type {Error} */ (e).message);
    }
    let c = bySession.get(d.session);
    if (!c) {
      c = { session: d.session, deltas: 0, complete: d.parentHash === ZERO_DELTA_HASH, firstParent: d.parentHash, head: "", lastIndex: i };
      bySession.set(d.session, c);
    } else if (d.parentHash !== c.head) {
      if (d.parentHash === ZERO_DELTA_HASH) {
        throw new VerificationError("delta chain",
          `session ${ab(d.session)}: delta ${d.id} at index ${i} starts a second chain (zero parent_hash) after the delta at index ${c.lastIndex}`);
      }
      throw new VerificationError("delta chain",
        `session ${ab(d.session)}: delta ${d.id} at index ${i}: parent_hash ${d.parentHash} is not the hash ${c.head} of the session's previous delta (index ${c.lastIndex})`);
    }
    c.deltas++;
    c.lastIndex = i;
    c.head = d.deltaHash;
  }
  if (bySession.size !== 1) throw new VerificationError("delta chain", `${bySession.size} sessions, a chain is one session's`);
  const chain = /** @type {NonNullable<ReturnType<typeof bySession.get>>} */ ([...bySession.values()][0]);
  if (complete && !chain.complete) {
    throw new VerificationError("delta chain",
      `session ${ab(chain.session)}: the first delta's parent_hash is ${chain.firstParent}, not the zero hash: the chain does not start at its beginning`);
  }
  return { session: chain.session, deltas: chain.deltas, complete: chain.complete, firstParent: chain.firstParent, head: chain.head };
}

/**
 * Verifies a session's delta chain as annald's API answers it (GET
 * /v1/sessions/{id}/deltas: [{index, delta}] in log order): each delta's
 * hash recomputes (a delta whose changes are kept for a time carries them
 * beside their commitment while the kernel keeps them: they are dropped
 * before hashing, FORMATS.md), the first parent is the zero hash, and each
 * parent_hash is the previous delta_hash. Returns the head.
 * @param {{index: number, delta: Record<string, any>}[]} chain
 */
export async function verifyDeltaList(chain) {
  let head = ZERO_DELTA_HASH;
  let prev = -1;
  for (const { index, delta } of chain) {
    const hashed = { ...delta };
    if ("sealed" in delta) delete hashed.changes;
    const h = await deltaHash(hashed);
    if (h !== delta.delta_hash) {
      throw new VerificationError("delta chain", `delta ${delta.delta_id}: delta_hash ${delta.delta_hash} is not the hash of its members, ${h}`);
    }
    if (delta.parent_hash !== head) {
      throw new VerificationError("delta chain", prev < 0
        ? `session ${ab(delta.session_id)}: the first delta's parent_hash is ${delta.parent_hash}, not the zero hash: the chain does not start at its beginning`
        : `session ${ab(delta.session_id)}: delta ${delta.delta_id} at index ${index}: parent_hash ${delta.parent_hash} is not the hash ${head} of the session's previous delta (index ${prev})`);
    }
    head = h;
    prev = index;
  }
  return head;
}
