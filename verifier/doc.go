// Package verifier checks what an Annal log hands out — tlog-proofs,
// consistency proofs, event entries — offline, with nothing but the log's
// verifier key.
//
// Its contract: it imports only the checkpoints package of this repository
// and public libraries (x/mod note, transparency-dev merkle, gowebpki/jcs),
// never kernel/, logserver/ or witness/, so a bug shared with the kernel
// cannot make a bad proof pass (a test enforces this). It does no I/O and no
// network. Every failure is a *Error that names the check that failed; no
// input makes it panic.
package verifier
