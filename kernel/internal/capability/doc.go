// Package capability implements the capability patterns of the Annal kernel:
// an actor's writable targets W(p) as pairs (glob pattern × action types)
// (Def. 4.11), the matching of a target that default deny (Axiom 4.3) rests
// on, and the inclusion of one actor's or envelope's grants in another's
// (Def. 4.12).
//
// # Patterns
//
// Targets are '/'-separated paths as event.ValidateTarget accepts them:
// non-empty segments, none "." or "..", no control character or backslash,
// at most 1024 bytes. A pattern is '/'-separated segments too. Each segment
// is either
//   - exactly "**", which matches zero or more whole segments, or
//   - a segment glob, in which '*' matches any run, possibly empty, of
//     characters other than '/', and every other character stands for itself.
//
// So "workspace/*" matches "workspace/a" but not "workspace/a/b";
// "workspace/**" matches "workspace", "workspace/a" and "workspace/a/b";
// "data/*.json" matches "data/x.json"; "**" matches every target.
//
// ParsePattern is strict. It MUST refuse: the empty pattern; a pattern over
// 1024 bytes (the longest target) or over 32 segments; invalid UTF-8;
// control characters (below 0x20, and 0x7f) and backslash; empty, "." and
// ".." segments; "**" inside a longer segment ("a**"); and any other run of
// consecutive '*' ("***"). String returns the pattern as written.
//
// Match reports whether a pattern matches a target. It MUST return false for
// a target event.ValidateTarget refuses, the empty target included, so a
// pattern is never asked about the empty path. Match runs in time linear in
// the target for a given pattern (a set of pattern positions is carried
// across the target's segments, never backtracking across segments), and a
// segment glob matches in time at most the product of the two lengths.
//
// # Inclusion
//
// A pattern covers another if it matches every target the other matches.
// The decision MUST be sound: a pattern covers another only if that holds.
// The language of a pattern is the set of targets it matches; the empty path
// is not a target, so "**" and "*/**" have the same language and cover each
// other. The decision is exact: a pattern fails to cover another only when
// some path matches the other and not it, except when deciding takes more
// than 4096 search states, in which case it is refused (conservative, and
// sound). It decides on the patterns themselves, so "workspace/**" covers
// "workspace/*" and "workspace/a", while "workspace/*" does not cover
// "workspace/**" (the target "workspace" shows it). Paths are of any length:
// a child whose only uncovered paths are longer than 1024 bytes is refused
// too. The comment on decideCover gives the method and why it is sound and
// exact.
//
// # Grants and sets
//
// A Grant pairs a pattern with action types (observe, create, mutate,
// execute, as event.ActionType). A Set is an actor's or envelope's grants,
// at most event.MaxGrants of them. SetFromEvent reads the grants an event
// carries, strictly: a pattern ParsePattern refuses, an action type that is
// not one of the four names, or a grant that lists none is an error.
//
// Default deny is the ledger's check: an action of type t on a target is
// allowed only if some grant lists t and its pattern matches the target.
// Set.CheckCovers (delegation) holds only if, for each child grant and each
// of its action types, ONE parent grant listing that type covers the child
// grant's pattern. A child grant covered only by the union of several parent
// grants is refused: conservative, and sound. The searches of one
// Set.CheckCovers together reach at most 2^18 states, past which it refuses.
// Both bounds, 4096 states for a pair and 2^18 for a set, are part of the
// contract: a kernel replaying the log MUST decide with the same ones as the
// kernel that wrote it.
//
// # Privileged targets
//
// Targets whose first segment is "system" or "ledger" are privileged: only
// root may write them, whatever grants another actor holds (a pattern such
// as "**" matches them too). IsPrivileged says which targets are concerned;
// the check itself is the ledger's, which knows who root is.
package capability
