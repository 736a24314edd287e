// The JSON level of an Annal log entry (FORMATS.md, "What Annal accepts in
// JSON"): valid UTF-8, well-formed JSON with no duplicate member, no lone
// surrogate, no number that canonical JSON would write as another value, at
// most 34 levels deep, and the entry already in RFC 8785 canonical form.
// This is not Annal's event parser: an entry that passes may still not be
// a valid event (its kind, fields and their rules are not checked here).

import { canonicalJSON } from "./canonical.js";
import { bytesOf, decodeUTF8 } from "./encoding.js";

export const MAX_ENTRY_SIZE = 65535;
const MAX_DEPTH = 34;

/** Reads an entry's JSON strictly; returns its value. @param {string | Uint8Array} input */
export function readEntryJSON(input) {
  const raw = bytesOf(input);
  if (raw.length > MAX_ENTRY_SIZE) throw new Error(`entry is ${raw.length} bytes, more than ${MAX_ENTRY_SIZE}`);
  const text = decodeUTF8(raw);
  if (text === undefined) throw new Error("entry: JSON is not valid UTF-8");
  const p = new StrictJSON(text, raw);
  p.space();
  const value = p.value(0);
  p.space();
  if (p.i < text.length) p.malformed("after the value");
  if (canonicalJSON(value) !== text) throw new Error("entry is not in canonical form (RFC 8785)");
  return value;
}

/**
 * Reads JSON as strictly as an entry (UTF-8, no duplicate member, no lone
 * surrogate, no number canonical JSON would rewrite, at most 34 deep), in
 * any form: what another of Annal's JSON formats (an evidence file) is
 * read with. what names the input in errors.
 * @param {string | Uint8Array} input @param {string} what
 */
export function readStrictJSON(input, what) {
  const text = decodeUTF8(bytesOf(input));
  if (text === undefined) throw new Error(`${what}: JSON is not valid UTF-8`);
  const p = new StrictJSON(text, bytesOf(input), what);
  p.space();
  const value = p.value(0);
  p.space();
  if (p.i < text.length) p.malformed("after the value");
  return value;
}

class StrictJSON {
  /** @param {string} s @param {Uint8Array} raw @param {string} [what] */
  constructor(s, raw, what = "entry") {
    this.s = s;
    this.raw = raw;
    this.i = 0;
    this.what = what;
  }

  /** The byte offset of character index i. */
  byteAt(/** @type {number} */ i) {
    return new TextEncoder().encode(this.s.slice(0, i)).length;
  }

  /** @param {string} where @returns {never} */
  malformed(where) {
    if (this.i >= this.s.length) throw new Error(`${this.what}: JSON is malformed: end of input at byte ${this.byteAt(this.i)} ${where}`);
    const c = /** @type {number} */ (this.s.codePointAt(this.i));
    const shown = c < 0x20 || c > 0x7e ? `'\\u${c.toString(16).padStart(4, "0")}'` : `'${String.fromCodePoint(c)}'`;
    throw new Error(`${this.what}: JSON is malformed: ${shown} at byte ${this.byteAt(this.i)} ${where}`);
  }

  space() {
    while (this.i < this.s.length && " \t\n\r".includes(this.s[this.i])) this.i++;
  }

  /** @param {number} depth @returns {unknown} */
  value(depth) {
    const c = this.s[this.i];
    if (c === "{" || c === "[") {
      if (depth + 1 > MAX_DEPTH) throw new Error(`${this.what}: JSON nests deeper than ${MAX_DEPTH} levels`);
      return c === "{" ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (c === '"') return this.string();
    for (const [word, v] of /** @type {[string, unknown][]} */ ([["true", true], ["false", false], ["null", null]])) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return v;
      }
    }
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    return this.malformed("where a value should start");
  }

  /** @param {number} depth */
  object(depth) {
    this.i++;
    /** @type {Record<string, unknown>} */
    const out = {};
    const seen = new Set();
    this.space();
    if (this.s[this.i] === "}") {
      this.i++;
      return out;
    }
    for (;;) {
      this.space();
      if (this.s[this.i] !== '"') this.malformed("where a member name should start");
      const name = this.string();
      if (seen.has(name)) throw new Error(`${this.what}: JSON object has the member ${JSON.stringify(name)} twice`);
      seen.add(name);
      this.space();
      if (this.s[this.i] !== ":") this.malformed("where ':' should be");
      this.i++;
      this.space();
      Object.defineProperty(out, name, { value: this.value(depth), enumerable: true, writable: true, configurable: true });
      this.space();
      if (this.s[this.i] === ",") {
        this.i++;
        continue;
      }
      if (this.s[this.i] === "}") {
        this.i++;
        return out;
      }
      this.malformed("where ',' or '}' should be");
    }
  }

  /** @param {number} depth */
  array(depth) {
    this.i++;
    /** @type {unknown[]} */
    const out = [];
    this.space();
    if (this.s[this.i] === "]") {
      this.i++;
      return out;
    }
    for (;;) {
      this.space();
      out.push(this.value(depth));
      this.space();
      if (this.s[this.i] === ",") {
        this.i++;
        continue;
      }
      if (this.s[this.i] === "]") {
        this.i++;
        return out;
      }
      this.malformed("where ',' or ']' should be");
    }
  }

  string() {
    const start = this.i;
    this.i++;
    for (;;) {
      if (this.i >= this.s.length) this.malformed("inside a string");
      const c = this.s.charCodeAt(this.i);
      if (c === 0x22) break;
      if (c < 0x20) this.malformed("inside a string");
      if (c === 0x5c) {
        const e = this.s[this.i + 1];
        if (e === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(this.s.slice(this.i + 2, this.i + 6))) this.malformed("in a \\u escape");
          this.i += 6;
          continue;
        }
        if (!e || !'"\\/bfnrt'.includes(e)) this.malformed("in an escape");
        this.i += 2;
        continue;
      }
      this.i++;
    }
    this.i++;
    const literal = this.s.slice(start, this.i);
    const value = JSON.parse(literal);
    // A \u escape may denote half of a surrogate pair alone.
    const lone = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.exec(value);
    if (lone) throw new Error(`${this.what}: JSON string has a lone UTF-16 surrogate \\u${lone[0].charCodeAt(0).toString(16)}`);
    return value;
  }

  number() {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(this.s.slice(this.i));
    if (!m) return this.malformed("in a number");
    const literal = m[0];
    this.i += literal.length;
    if (literal.length > 128) throw new Error(`${this.what}: JSON number ${literal.slice(0, 32)}... is longer than 128 characters`);
    if (m[3] && Math.abs(Number(m[3].slice(1))) > 400) throw new Error(`${this.what}: JSON number ${literal} has an exponent beyond ±400`);
    const n = Number(literal);
    const canonical = canonicalJSON(n);
    if (decimal(literal) !== decimal(canonical)) {
      throw new Error(`${this.what}: JSON number ${literal} would be written ${canonical} in canonical JSON (RFC 8785), another value; send it as a string`);
    }
    return n;
  }
}

/** The exact decimal value a number literal denotes, as "<sign><digits>e<exp>". */
function decimal(/** @type {string} */ s) {
  const m = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/.exec(s);
  if (!m) return s;
  let digits = m[2] + (m[3] ?? "");
  let exp = Number(m[4] ?? 0) - (m[3]?.length ?? 0);
  digits = digits.replace(/^0+/, "");
  if (digits === "") return "0";
  const trailing = /0*$/.exec(digits)?.[0].length ?? 0;
  digits = digits.slice(0, digits.length - trailing);
  exp += trailing;
  return `${m[1]}${digits}e${exp}`;
}
