// Package strictjson reads the JSON that comes into Annal from outside: the
// bodies of HTTP requests, the policies, session configurations, action
// descriptors and hold answers callers send, and the files people give the
// command line. encoding/json is not fit for that: it matches member names
// case-insensitively and with Unicode case folding, so {"target":"a",
// "Target":"b"} reads as "b", "ſession" (U+017F) reads as "session", and
// "\u212Aind" (the Kelvin sign) reads as "kind"; it keeps the last of two
// equal members, and it turns invalid UTF-8 into U+FFFD.
//
// Check refuses JSON that a canonical (RFC 8785) log entry could not carry
// with the same meaning: see its comment.
//
// Decode reads one JSON value into a Go value, and promises:
//
//   - data MUST pass Check first; nothing else is read.
//   - A member of an object read into a Go struct MUST be named exactly,
//     byte for byte after unescaping, as one of the struct's fields: the
//     name in its json tag, or the Go field name when the tag gives none;
//     fields of an embedded struct without a json name count as the
//     parent's. No case folding, no Unicode folding: "Target", "TARGET",
//     "ſession" and "\u212Aind" are not "target", "session" and "kind".
//   - A member that names no field, in another case or not at all, is
//     refused, and so is a member given twice; the error names the member
//     and, below the top, where it is as a JSON Pointer (RFC 6901).
//   - The keys of a Go map are taken as they are, and a json.RawMessage or
//     an any holds the member's value unread: whoever reads it later MUST be
//     as strict.
//   - A type with its own UnmarshalJSON (the encoding/json interface) or
//     UnmarshalText is handed the exact bytes of its value, and decides
//     alone: such a method that reads an object MUST match names exactly
//     too (it calls Decode, or looks names up in a map by exact key).
//   - Struct tags MUST NOT carry the json/v2 option case:ignore, which
//     would turn folding back on for that field.
//   - On error the destination is left as it was; on success it holds what
//     data says, as if it had been zero before (nothing is merged).
//
// Decode is built on github.com/go-json-experiment/json, the prototype of
// encoding/json/v2, whose defaults are exact names and no duplicates; it is
// asked, in addition, to refuse unknown members.
package strictjson
