// Package verifier checks what an Annal log hands out — tlog-proofs,
// consistency proofs, event entries, equivocation evidence, audit bundles
// and the delta chains inside them — offline, with nothing but the log's
// verifier key or a c2sp.org/tlog-policy.
//
// Its contract:
//
//   - Of this repository it imports only the checkpoints package and the
//     format declarations (format/bundle, format/evidence: names, members
//     and limits that writer and reader share, no checking code), besides
//     public libraries (x/mod note, transparency-dev merkle and formats,
//     gowebpki/jcs); never kernel/, server/, client/ or witness/, so a bug shared
//     with the kernel cannot make a bad proof pass (a test enforces this).
//     Every check is its own: it parses bundle and evidence lines strictly
//     into the shared declarations, and the delta-chain rules in particular
//     are written again here from testvectors/FORMATS.md, not taken from
//     kernel/delta.
//   - It does no network I/O. VerifyBundle reads the io.Reader it is given
//     once, as a stream, holding a bounded number of lines at a time, so a
//     bundle of millions of events needs bounded memory.
//   - A success means what its result says: every event reported is the
//     log's entry at its index under a checkpoint signed by the log key (and,
//     with a policy, cosigned by its quorum). A bundle that selects events
//     proves nothing about the events it does not hold.
//   - Every failure is a *Error that names the check that failed and, for
//     bundles, the line; verification stops at the first failure. No input
//     makes it panic (fuzz tests cover every parser).
package verifier
