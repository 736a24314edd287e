// Paths of the agent file system (testvectors/FORMATS.md, "The agent file
// system"; seed 002, Virtual File System), as Annal's format/vfspath parses
// them: vfs://AGENT/PATH is the target vfs/AGENT/PATH, a directory, a view
// of the log, or a file DIR/NAME. A URI the parser refuses is never sent.
// Also the statement of a signed write (vfspath.SignedWrite): the write's
// body is the file's bytes, so its signature states the action it is.

import { concat, oidOf, toHex, utf8 } from "./encoding.js";

export const VFS_SCHEME = "vfs://";
/** The largest file one write stores (api.MaxVFSContent). */
export const MAX_VFS_CONTENT = 1 << 20;
const MAX_NAME = 128;
const MAX_DEPTH = 8;
const MAX_PATH = 512;
const RESERVED = "sessions";

// The tree's directories, each with whether files are written in it.
const DIRS = new Map([
  ["mem", false], ["mem/working", true], ["mem/episodic", true], ["mem/semantic", true],
  ["state", false], ["state/checkpoints", true], ["policy", false], ["ipc", false],
  ["ipc/inbox", true], ["ipc/outbox", false], ["audit", false],
]);
const VIEWS = new Set(["policy/active.json", "policy/history.json", "audit/events.jsonl"]);
const INBOX = "ipc/inbox";
const OUTBOX = "ipc/outbox";

/** A URI that names no path of an agent's tree, or a write to a read-only one. */
export class VFSPathError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "VFSPathError";
  }
}

const invalid = (/** @type {string} */ why) => new VFSPathError(`not a path of the agent file system: ${why}`);
const readOnly = (/** @type {string} */ why) => new VFSPathError(`read-only: ${why}`);

/** Shortens s as vfspath's clip does (80 bytes). */
function clip(/** @type {string} */ s) {
  const b = utf8.encode(s);
  return b.length > 80 ? new TextDecoder().decode(b.slice(0, 80)) + "…" : s;
}

/** Go's %q of an ASCII string (what the names' check lets through). */
const q = (/** @type {string} */ s) => JSON.stringify(s);

/** Go's %q of one byte as a rune. */
function runeQuote(/** @type {number} */ c) {
  const esc = /** @type {Record<number, string>} */ ({ 7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 39: "\\'", 92: "\\\\" });
  if (esc[c]) return `'${esc[c]}'`;
  if (c < 0x20 || c === 0x7f) return `'\\x${c.toString(16).padStart(2, "0")}'`;
  if (c >= 0x80 && c < 0xa0) return `'\\u${c.toString(16).padStart(4, "0")}'`;
  return `'${String.fromCharCode(c)}'`;
}

/** A path of an agent's tree: agent, and rel relative to the tree ("" for its root). */
export class VFSPath {
  /** @param {string} agent @param {string} rel */
  constructor(agent, rel) {
    this.agent = agent;
    this.rel = rel;
  }

  /** The directory of a file ("" for a directory or a view). */
  get dir() {
    if (this.rel === "" || DIRS.has(this.rel) || VIEWS.has(this.rel)) return "";
    for (const [d, writable] of DIRS) {
      if ((writable || d === OUTBOX) && this.rel.startsWith(d + "/")) return d;
    }
    return "";
  }

  get isDir() {
    return this.rel === "" || DIRS.has(this.rel);
  }

  get isView() {
    return VIEWS.has(this.rel);
  }

  get uri() {
    return VFS_SCHEME + this.agent + "/" + this.rel;
  }

  /** The action target the log records: vfs/AGENT/PATH. */
  get target() {
    return "vfs/" + this.agent + "/" + this.rel;
  }

  /** create for a message to an inbox, mutate otherwise. */
  get writeType() {
    return this.dir === INBOX ? "create" : "mutate";
  }

  /** Throws a VFSPathError unless a file may be written here. */
  checkWritable() {
    if (this.isView) throw readOnly(`${this.uri} is a view of the log; it changes only as the log does`);
    if (this.isDir) throw readOnly(`${this.uri} is a directory; write a file in it`);
    if (this.dir === OUTBOX) {
      throw readOnly(`${this.uri} lists what ${this.agent} wrote to other agents' ${INBOX}; write to vfs://<agent>/${INBOX}/<name> instead`);
    }
  }

  /** The API path of GET and PUT /v1/vfs/{agent}/{path}. */
  get apiPath() {
    return "v1/vfs/" + this.agent + (this.rel === "" ? "" : "/" + this.rel);
  }
}

/**
 * Parses vfs://AGENT/PATH (a trailing "/" names the same directory).
 * @param {string} uri
 */
export function parseVFSURI(uri) {
  if (!uri.startsWith(VFS_SCHEME)) throw invalid(`${q(clip(uri))} does not start with ${VFS_SCHEME}`);
  const rest = uri.slice(VFS_SCHEME.length);
  const slash = rest.indexOf("/");
  const agent = slash < 0 ? rest : rest.slice(0, slash);
  const rel = slash < 0 ? "" : rest.slice(slash + 1).replace(/\/$/, "");
  return parseVFS(agent, rel);
}

/** @param {string} agent @param {string} rel */
export function parseVFS(agent, rel) {
  if (!/^[a-z][a-z0-9-]{0,63}$/.test(agent)) throw invalid(`agent ${q(clip(agent))} is not an actor id ([a-z][a-z0-9-]{0,63})`);
  if (agent === RESERVED) throw invalid(`vfs://${RESERVED}/ holds the files of sessions, not an agent's tree`);
  const p = new VFSPath(agent, rel);
  if (rel === "" || DIRS.has(rel) || VIEWS.has(rel)) return p;
  if (utf8.encode(rel).length > MAX_PATH) throw invalid(`path is ${utf8.encode(rel).length} bytes, more than ${MAX_PATH}`);
  const dir = p.dir;
  if (dir === "") throw invalid(`${q(clip(rel))} is not in one of the tree's directories (${[...DIRS.keys()].join(", ")})`);
  checkName(dir, rel.slice(dir.length + 1));
  return p;
}

/** @param {string} dir @param {string} name */
function checkName(dir, name) {
  if (name === "") throw invalid(`${dir}/ needs a file name after it`);
  const segs = name.split("/");
  if (segs.length > MAX_DEPTH) throw invalid(`${dir}/${clip(name)} has ${segs.length} segments under ${dir}/, more than ${MAX_DEPTH}`);
  for (const s of segs) {
    if (s === "") throw invalid(`${dir}/${clip(name)} has an empty segment`);
    if (s === "." || s === "..") throw invalid(`${dir}/${clip(name)} has a ${q(s)} segment`);
    const bytes = utf8.encode(s);
    if (bytes.length > MAX_NAME) throw invalid(`a segment of ${dir}/ is ${bytes.length} bytes, more than ${MAX_NAME}`);
    const bad = bytes.find((c) => !/[A-Za-z0-9._-]/.test(String.fromCharCode(c)));
    if (bad !== undefined) throw invalid(`${dir}/${clip(name)} holds ${runeQuote(bad)}; a name is made of A-Z a-z 0-9 . _ -`);
  }
}

/**
 * The request a signature of a write of content to p states: POST
 * /v1/actions with the action the write is (type, target, payload_hash,
 * envelope when given), as vfspath.WriteRequest writes it.
 * @param {VFSPath} p @param {Uint8Array} content @param {string} [envelope]
 */
export async function vfsWriteRequest(p, content, envelope) {
  /** @type {Record<string, string>} */
  const body = { type: p.writeType, target: p.target, payload_hash: await oidOf(content) };
  if (envelope) body.envelope = envelope;
  return { method: "POST", path: "/v1/actions", body: JSON.stringify(body) };
}

