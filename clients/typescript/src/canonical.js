// RFC 8785 canonical JSON (the encoding of every Annal event entry), from
// the canonicalize package.
import canonicalizeModule from "canonicalize";

// canonicalize 2.x is CommonJS whose types declare an ES default export.
const canonicalize = /** @type {(input: unknown) => string | undefined} */ (/** @type {unknown} */ (canonicalizeModule));

/** The RFC 8785 encoding of a JSON value. @param {unknown} value @returns {string} */
export function canonicalJSON(value) {
  const s = canonicalize(value);
  if (s === undefined) throw new Error("value has no JSON encoding");
  return s;
}
