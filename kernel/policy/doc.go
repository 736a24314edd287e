// Package policy is the Agent OS policy engine: named, declarative rules that
// block an action by one of its names or by a pattern in its payload.
//
// # Format
//
// A policy is one JSON object:
//
//	{"name":"strict","blocked_actions":["shell_exec"],"blocked_patterns":["\\bdrop\\s+table\\b"],
//	 "audit_all":false,"signal_on_violation":false,"allowed_tools":["mcp/fs/read_text_file"],
//	 "max_calls_per_minute":10}
//
// Parse is strict. It MUST refuse: more than MaxPolicySize bytes; anything
// but one JSON object (trailing data included); a key other than the seven
// above, a key spelt in another case ("Name"), a key given twice; a value
// of the wrong type. Every key may be left out (a missing list is empty,
// audit_all is false, signal_on_violation is true as the seed has it), but
// the name must then still be valid, so "name" is in effect required.
// Parse then calls Validate.
//
// Validate MUST refuse a policy whose
//   - name does not match ^[a-z][a-z0-9_-]{0,63}$;
//   - blocked_actions has more than MaxBlockedActions entries, an entry of 0
//     or more than MaxActionSize bytes, an entry that is not UTF-8 or holds a
//     rune unicode.IsPrint refuses (controls, and spaces other than U+0020),
//     or an entry given twice;
//   - blocked_patterns has more than MaxPatterns entries, an entry of more
//     than MaxPatternSize bytes, an entry given twice, an entry that Go's
//     regexp (RE2 syntax) does not compile, an entry that turns case folding
//     off with a flag group such as (?-i) or (?s-i:...), or an entry whose
//     match can be empty (see below);
//   - allowed_tools has more than MaxAllowedTools entries, an entry that is
//     not mcp/<server>/<tool> (two non-empty segments after "mcp/", no
//     space or control in the server, no control in the tool), breaks the
//     rules of a blocked action, or is given twice.
//
// # Patterns
//
// Patterns are RE2, compiled by Go's regexp with case folding on ((?i) in
// force from the first character). RE2 matches in time linear in the
// payload for a given pattern and has no backreferences or lookaround, so
// no pattern, however written, can make Check take exponential time (the
// "catastrophic backtracking" of Python's re, which the seed uses, cannot
// happen here). Python-only syntax such as (?P=name) or (?=...) is refused
// at Validate. Linear is still slow for a case-insensitive pattern, which
// Go's regexp tries at every byte: each pattern gets a prefilter, literals
// one of which every match holds, and an ASCII payload holding none of them
// (without case) is cleared without the regular expression. The verdict is
// the regular expression's either way.
//
// A pattern whose match can be empty is refused: "x*", "a?", "^", "$",
// "\b", "(?:)". A zero-length match carries no content, so such a pattern
// blocks a payload for where it is rather than for what it contains: "x*"
// and "^" match every payload and would block every action of every agent
// the policy applies to; "\b" blocks every payload with a word character.
// The check is on the pattern itself (can its syntax tree match a run of
// zero characters, counting ^, $, \b and \B as zero-width), not only on
// whether it matches "".
//
// Patterns see the payload's bytes as the kernel passes them: canonical JSON
// (RFC 8785), as the seed matches json.dumps(params). They match the JSON
// text, not the decoded strings: a newline inside a string is the two
// characters \n there, so "drop\s+table" does not see "drop<newline>table".
//
// # Checking
//
// Compile turns a valid policy into a *Compiled. Check(actionNames,
// payload) MUST return a *Violation when any of actionNames is one of the
// policy's blocked actions, when any of them is a target mcp/<server>/<tool>
// of a server the policy lists allowed tools of and the tool is not one of
// them (AGENTS.md's "tools to allow": the list closes that server, and only
// that server), or when any pattern matches the payload, and nil otherwise. Blocked actions are matched exactly, byte for byte and case
// sensitively, like the seed's `action in blocked_actions`: the kernel's
// action types, action ids and targets are case-sensitive identifiers, so
// "Delete" is a different action from "delete". A policy author who wants
// both MUST list both. Names are checked before patterns, names in the order
// given and patterns in the order the policy lists them, so the violation
// reported is deterministic.
//
// Evaluate checks a list of compiled policies in order and returns the first
// violation. It fails closed: a nil entry is a violation (RuleMissingPolicy)
// rather than skipped, where the seed skips an unknown policy name.
//
// AuditAll and SignalOnViolation do not change what Check returns. They
// travel in the logged policy: the kernel reads SignalOnViolation from its
// record of the policy to decide whether a violation also ends the agent
// with SIGKILL. Seed 002's kernel does ("If ANY check fails → SIGKILL"),
// so Parse, ParseAgentsMD, ParseAgentsDir and Defaults set it unless the
// policy says "signal_on_violation": false (deny only). The kernel does
// not read AuditAll.
//
// Everything here is pure and deterministic (no clock, randomness or I/O),
// so the kernel may call it both live and when replaying its log. A
// *Compiled is immutable and safe for concurrent use.
package policy
