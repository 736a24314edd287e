// Package checkpoints holds Annal's C2SP byte formats that both sides of the
// trust boundary need: the log's Ed25519 keys in x/mod note form, checkpoints
// (c2sp.org/tlog-checkpoint) signed as c2sp.org/signed-note, and single-entry
// proofs (c2sp.org/tlog-proof).
//
// The package is pure: no I/O, no clocks, no state. Parsers are strict: they
// refuse anything the format does not allow rather than guess, and every
// parser has a fuzz test. The offline verifier imports this package and,
// besides it, only the format declarations of format/, so nothing here may
// import kernel, server, client or witness code.
package checkpoints
