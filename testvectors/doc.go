// Package testvectors is Annal's byte-level contract: known-answer vectors
// for every format Annal writes (event entries and their leaf hashes, signed
// checkpoints, c2sp.org/tlog-proof and consistency proofs), the
// specification they follow in FORMATS.md, and the test that recomputes each
// vector with Annal's code and with independent libraries.
//
// The JSON files are meant to be read by other implementations. Run
//
//	go test ./testvectors -update
//
// to rewrite their expected values after an intended format change; without
// -update the test fails on any difference.
package testvectors
