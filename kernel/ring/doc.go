// Package ring implements the execution rings of Agent Hypervisor Execution
// Control 1.0 (§3–§8, §16, §17.1–§17.2): the four rings and their order,
// score-based ring assignment and demotion, action descriptors and the ring
// each one requires, the ring check, per-ring resource constraints, the
// decision logic of privilege elevation, and the risk weight of an action.
//
// Contract. The package is pure: it does no I/O, keeps no state, reads no
// clock and imports nothing from the kernel. Every function is a decision
// over its arguments, so the kernel can replay a decision from its log and
// get the same answer. Decisions fail closed (§19.1): an unknown ring, an
// unknown reversibility or a malformed input is denied or treated as the
// least privileged, never the most.
//
// Scores are integers in basis points (Score, 0..10000), so thresholds are
// compared exactly and events never carry floats.
//
// Errors name the thing and the rule that refused it, and wrap
// ErrInvalidValue (the specification's ValueError) or ErrTypeMismatch (its
// TypeError, §17.3) so callers can tell them apart with errors.Is.
package ring
