// Package session implements the session model and session isolation of
// Agent Hypervisor Execution Control 1.0 (§10, §11, §17.3, §17.4, §20.5) for
// the Annal kernel.
//
// Everything here is pure and deterministic: no clock, no randomness, no I/O.
// Times are passed in by the caller. The kernel records every decision as a
// log event and calls the same functions when folding the log on replay, so a
// method that refuses a change MUST leave its receiver exactly as it was.
//
// # State machine (§10.1)
//
// CREATED → HANDSHAKING → ACTIVE → TERMINATING → ARCHIVED, and CREATED or
// HANDSHAKING may also go straight to TERMINATING. ARCHIVED is final and no
// state goes back. CanTransition is the whole machine.
//
// Joins are accepted in HANDSHAKING only (the §10.1 table: HANDSHAKING is
// "accepting participant join requests", ACTIVE is "executing actions");
// actions are accepted in ACTIVE only. A session that wants more participants
// once active is a new session; this is the fail-closed reading of the table.
//
// # Configuration (§10.2, §17.3)
//
// Config is the event form: the minimum effective score is stored in basis
// points (0..10000, JSON "min_eff_score_bp") so that no event carries a float.
// ParseConfig reads the API form, in which min_eff_score is a JSON number in
// [0.0, 1.0] (e.g. 0.6), converted to basis points by rounding to nearest.
// ParseConfig is strict: unknown or repeated members, invalid UTF-8, trailing
// data and bodies over MaxConfigSize are refused; a value of the wrong JSON
// type gives an error wrapping ErrType (the spec's TypeError), a value out of
// range an error wrapping ErrRange (the spec's ValueError). Integers MUST be
// written as integers: 10.0, 1e1, "10" and true are type errors.
//
// # Participants (§10.3, §17.4)
//
// Participant stores its scores in basis points as well. Session.Join records
// the effective score the kernel computed, not the one a caller claims, and
// refuses a participant below Config.MinEffScore. MaxParticipants counts
// active participants only; a participant that left may join again while the
// session still accepts joins.
//
// # Isolation (§11, §20.5)
//
// A session's working directory is WorkDir(id) = "sessions/<id>" in Annal's
// target namespace (slash-separated relative paths). IsPathAllowed decides a
// read or a write of a target under a Scope: a nil scope denies everything
// (§11.4); the target is refused if it is absolute, empty, has an empty
// segment, a backslash, a percent sign, a control character or invalid UTF-8;
// otherwise it is canonicalised with path.Clean and compared segment by
// segment, so "sessions/s-1/../s-2/x" is inside s-2 and "sessions/s-10/x" is
// not inside s-1. The own session directory may be read and written; a
// granted session's directory may only be read, and only under
// READ_COMMITTED (§11.5); everything else is denied (§11.3). Every denial
// wraps ErrDenied and names the rule.
package session
