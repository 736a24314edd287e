// RFC 8785 canonical JSON (the encoding of every Annal event entry), from
// the canonicalize package.
import canonicalize from "canonicalize";

/** The RFC 8785 encoding of a JSON value. @param {unknown} value @returns {string} */
export function canonicalJSON(value) {
  const s = canonicalize(value);
  if (s === undefined) throw new Error("value has no JSON encoding");
  return s;
}
