// Package logstore is the kernel's log engine: everything of the log that
// lives on disk or in shared storage, and nothing of the rules.
//
// It owns the data folder (its keys, origin and lock: datadir.go), the
// write-ahead log in front of Tessera's tiles (writeahead.go, on
// kernel/internal/wal and kernel/internal/tilewriter), the group committer
// that writes decided entries a group at a time (groupcommit.go), the
// storage drivers and the write lease of a shared log (storage.go,
// lease.go), the start-up check, scrub and repair of the log's files
// (logcheck.go, repair.go), proofs from cached tiles (proofcache.go) and
// what the witnesses answer (witnesswatch.go).
//
// The kernel uses it through a small surface: Open (with a callback that
// checks the kernel's folded state against the log before anything is
// appended), Start (with Hooks: the fold of each durable group, handed in
// as OnDurable, and the sequencer's last check before a group is
// written), Log.Append for a decided entry, and reads of sizes,
// checkpoints, entries, tiles and proofs.
//
// Contracts:
//   - Log.Append returns only once the entry is durable at its index and
//     OnDurable has seen its group, in log order; an index is never given
//     twice, and after a crash at any instant the tiles take from the
//     write-ahead log exactly what they lack.
//   - Nothing is served or appended on top of a log that fails its
//     start-up check, and a log's signing key is never made anew for an
//     existing log.
//   - One data folder is opened by at most one process (an flock).
package logstore
