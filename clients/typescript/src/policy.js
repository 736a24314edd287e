// Witness policies (the format `annal verify --policy` reads, after
// transparency-dev's witness policy): log lines, witness lines, groups and a
// quorum. A checkpoint passes when the log signed it and the witnesses whose
// valid cosignatures it carries meet the quorum.

import { VerificationError, within } from "./errors.js";
import { abbreviate, decodeBase64, goQuote, parseDecimal } from "./encoding.js";
import { openCheckpoint } from "./checkpoint.js";
import { KEY_COSIGNATURE_V1, KEY_ED25519, KEY_MLDSA44, newVerifier } from "./note.js";
import { logVerifier, parseTLogProof, verifyProof } from "./proof.js";

export const MAX_POLICY_SIZE = 64 << 10;
const MAX_ENTRIES = 64;
/** @type {Record<string, [number, number, string]>} */
const USAGE = {
  log: [2, 3, "log <vkey> [<url>]"],
  witness: [3, 4, "witness <name> <vkey> [<url>]"],
  group: [4, Infinity, "group <name> <all|any|k> <name>..."],
  quorum: [2, 2, "quorum <name>"],
};

/**
 * @typedef {object} PolicyResult
 * @property {import("./checkpoint.js").SignedCheckpoint} checkpoint
 * @property {string} logKey
 * @property {string[]} cosigners witness names with a valid cosignature, sorted
 */

export class Policy {
  constructor() {
    /** @type {import("./note.js").NoteVerifier[]} */ this.logs = [];
    /** @type {string[]} */ this.logKeys = [];
    /** @type {Map<string, import("./note.js").NoteVerifier>} */ this.witnesses = new Map();
    /** @type {Map<string, {k: number, members: string[]}>} */ this.groups = new Map();
    this.quorum = "";
  }

  /**
   * Opens a checkpoint of one of the policy's logs and checks its quorum.
   * @param {string | Uint8Array} signed
   * @returns {Promise<PolicyResult>}
   */
  async openCheckpoint(signed) {
    const text = typeof signed === "string" ? signed : new TextDecoder("utf-8", { ignoreBOM: true }).decode(signed);
    const split = text.indexOf("\n\n");
    if (split < 0) throw new VerificationError("checkpoint signature", "checkpoint is not a signed note");
    const origin = text.slice(0, split).split("\n")[0];
    const i = this.logs.findLastIndex((v) => v.name === origin);
    if (i < 0) {
      throw new VerificationError("checkpoint signature", `checkpoint origin ${goQuote(abbreviate(origin, 80))} is not a log of the policy`);
    }
    const names = [...this.witnesses.keys()];
    const verifiers = [...this.witnesses.values()];
    const cp = await within("checkpoint signature", () => openCheckpoint(signed, this.logs[i], verifiers));
    const signedBy = new Set();
    for (const s of cp.note.sigs) {
      verifiers.forEach((v, j) => {
        if (s.name === v.name && s.keyHash === v.keyHash) signedBy.add(names[j]);
      });
    }
    const cosigners = [...signedBy].sort();
    if (!this.#witnessed(this.quorum, signedBy)) {
      throw new VerificationError(
        "policy",
        `the checkpoint's cosignatures (${cosigners.join(", ")}) do not meet the quorum ${goQuote(this.quorum)}`,
      );
    }
    return { checkpoint: cp, logKey: this.logKeys[i], cosigners };
  }

  /** @param {string} name @param {Set<string>} signedBy @returns {boolean} */
  #witnessed(name, signedBy) {
    if (name === "none") return true;
    if (this.witnesses.has(name)) return signedBy.has(name);
    const g = this.groups.get(name);
    if (!g) return false;
    return g.members.filter((m) => this.#witnessed(m, signedBy)).length >= g.k;
  }
}

/**
 * Parses a witness policy. Witness keys are cosignature/v1 (type 0x04,
 * Ed25519) or ML-DSA-44 (0x06).
 * @param {string} text
 * @returns {Promise<Policy>}
 */
export async function parsePolicy(text) {
  if (new TextEncoder().encode(text).length > MAX_POLICY_SIZE) {
    throw new VerificationError("policy", `policy is more than ${MAX_POLICY_SIZE} bytes`);
  }
  const bad = text.search(/[\u0000-\u0008\u000b-\u001f\u007f]/);
  if (bad >= 0) throw new VerificationError("policy", `policy has a control character at offset ${bad}`);
  const p = new Policy();
  const keys = new Set();
  const lines = text.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n];
    if (/^[ \t]*#/.test(line)) continue;
    const fields = line.split(/[ \t]+/).filter((f) => f !== "");
    if (fields.length === 0) continue;
    await within("policy", () =>
      policyLine(p, keys, fields).catch((e) => Promise.reject(new Error(`line ${n + 1}: ${e.message}`))),
    );
  }
  if (p.quorum === "") throw new VerificationError("policy", "policy has no quorum line");
  if (p.logs.length === 0) {
    throw new VerificationError("policy", "policy names no log: Annal verifies proofs of one log, named by a log line");
  }
  return p;
}

/** @param {Policy} p @param {Set<string>} keys @param {string[]} fields */
async function policyLine(p, keys, fields) {
  const usage = USAGE[/** @type {keyof typeof USAGE} */ (fields[0])];
  if (!usage) throw new Error(`unknown keyword ${goQuote(fields[0])}`);
  if (fields.length < usage[0] || fields.length > usage[1]) throw new Error(`want: ${usage[2]}`);
  const defined = (/** @type {string} */ name) => p.witnesses.has(name) || p.groups.has(name);
  const newName = (/** @type {string} */ name) => {
    if (name === "none") throw new Error(`${goQuote(name)} is predefined`);
    if (name.length > 255) throw new Error("name longer than 255 bytes");
    if (defined(name)) throw new Error(`${goQuote(name)} is defined twice`);
  };
  const newKey = (/** @type {string} */ vkey) => {
    const pub = vkey.slice(vkey.lastIndexOf("+") + 1);
    if (keys.has(pub)) throw new Error("a duplicate key");
    keys.add(pub);
  };
  switch (fields[0]) {
    case "log": {
      const v = await logVerifier(fields[1]).catch((e) => Promise.reject(new Error(`log key: ${e.message}`)));
      newKey(fields[1]);
      if (p.logs.length === MAX_ENTRIES) throw new Error(`more than ${MAX_ENTRIES} logs`);
      p.logs.push(v);
      p.logKeys.push(fields[1]);
      return;
    }
    case "witness": {
      newName(fields[1]);
      const v = await witnessVerifier(fields[2]).catch((e) => Promise.reject(new Error(`witness key: ${e.message}`)));
      newKey(fields[2]);
      if (p.witnesses.size === MAX_ENTRIES) throw new Error(`more than ${MAX_ENTRIES} witnesses`);
      p.witnesses.set(fields[1], v);
      return;
    }
    case "group": {
      const [, name, threshold, ...members] = fields;
      newName(name);
      const seen = new Set();
      for (const m of members) {
        if (!defined(m)) throw new Error(`member ${goQuote(m)} is not defined on an earlier line`);
        if (seen.has(m)) throw new Error(`member ${goQuote(m)} is listed twice`);
        seen.add(m);
      }
      let k = threshold === "all" ? members.length : threshold === "any" ? 1 : 0;
      if (k === 0) {
        let v = 0n;
        try {
          v = parseDecimal(threshold);
        } catch {
          /* refused below */
        }
        if (v < 1n || v > BigInt(members.length)) {
          throw new Error(`threshold ${goQuote(threshold)} is not a number from 1 to ${members.length}`);
        }
        k = Number(v);
      }
      if (p.groups.size === MAX_ENTRIES) throw new Error(`more than ${MAX_ENTRIES} groups`);
      p.groups.set(name, { k, members });
      return;
    }
    default: {
      if (p.quorum !== "") throw new Error("a second quorum line");
      if (fields[1] !== "none" && !defined(fields[1])) {
        throw new Error(`quorum ${goQuote(fields[1])} is not defined on an earlier line`);
      }
      p.quorum = fields[1];
    }
  }
}

/** A witness's key: cosignature/v1 (0x04, Ed25519) or ML-DSA-44 (0x06). @param {string} vkey */
export async function witnessVerifier(vkey) {
  const [name, id] = vkey.split("+");
  const key64 = vkey.split("+").slice(2).join("+");
  /** @type {Uint8Array} */
  let key = new Uint8Array();
  try {
    key = decodeBase64(key64 ?? "");
  } catch {
    /* refused below */
  }
  if (key.length === 0 || id?.length !== 8 || !name) {
    throw new Error(`${goQuote(abbreviate(vkey, 80))} is not a verifier key <name>+<8 hex key ID>+<base64 key>`);
  }
  if (key[0] === KEY_ED25519) {
    throw new Error(`${goQuote(abbreviate(vkey, 80))} is a plain Ed25519 key (type 0x01), a log's: a witness key is cosignature/v1 (0x04) or ML-DSA-44 (0x06)`);
  }
  if (key[0] !== KEY_COSIGNATURE_V1 && key[0] !== KEY_MLDSA44) {
    throw new Error(`${goQuote(abbreviate(vkey, 80))} has key type 0x${key[0].toString(16).padStart(2, "0")}; a witness key is cosignature/v1 (0x04) or ML-DSA-44 (0x06)`);
  }
  return newVerifier(vkey);
}

/**
 * verifyProof with the log key taken from a policy, and the proof's
 * checkpoint required to meet the policy's quorum.
 * @param {string | Uint8Array} entry
 * @param {string | Uint8Array} tlogProof
 * @param {Policy} policy
 */
export async function verifyProofWithPolicy(entry, tlogProof, policy) {
  const p = await within("proof format", () => parseTLogProof(tlogProof));
  const pr = await policy.openCheckpoint(p.checkpoint);
  const res = await verifyProof(entry, tlogProof, pr.logKey);
  return { proof: res, policy: pr };
}
