// Package kernel is Annal's sovereignty kernel: the sole committer of agent
// actions. Every request becomes at most one event in a Tessera tile log,
// decided by the rule of its kind.
//
// The package is the decision API and owns nothing on disk. Open and
// Config are in kernel.go and config.go; every request takes the one path
// of decide.go, and the commit stage's two checks are in commit.go (the
// sequencer before a group is written, the fold after it is durable);
// each operation has its file (actors.go, envelopes.go, holds.go,
// sessions.go, ...). Below it, in kernel/internal: the log engine
// (logstore: data folder, write-ahead log, group committer, Tessera's
// tiles, proofs), the read side (history: the state file and its index,
// history pages, audit bundles, Audit, Rebuild), the rules (ledger) and
// the sealed payloads (sealstore).
//
// Contracts:
//   - The log is the source of truth. Kernel state in bbolt is a cache of a
//     fold of the log's events in index order (kernel/internal/ledger), so
//     after a crash at any instant the kernel folds again from its last
//     recorded position and reaches the state a fresh replay gives.
//   - One rule per event kind, in the ledger: the kernel decides every
//     request on one path (decide.go) by building the event it would log and
//     running that rule — the same gates replay, rebuild and Audit run —
//     against the ledger the event will be folded onto. The kernel keeps only
//     what the log cannot show: credentials, the clock, the rate limit, the
//     bound on pending holds, new ids. Action gates run in ActionGateOrder;
//     what each gate checks is written once, in the ledger (Gates).
//   - Log order is decision order for events that do not commute: an event
//     claims what it reads and changes, and no two events in flight claim one
//     object when either changes it. Energy an event will draw is held until
//     it is folded, so the order of the entries of one group never matters.
//   - The kernel never writes what it cannot fold: after a failed append it
//     refuses all writes (Ready says why) until the data folder takes writes
//     again; then it folds what landed although reported failed and resumes
//     by itself, so nothing is written twice. A fold that fails, or a damaged
//     log, stops writes until an operator looks.
//   - Nothing is served or appended on top of a log that fails its check:
//     Open verifies the checkpoint under the log's own key and the newest
//     bundle and tiles against the tree state (checkLog), and the whole log
//     is scrubbed before serving (small logs) or in the background, at an
//     eighth of one core. A log's signing key is never made anew for an
//     existing log. A damaged state cache is set aside and rebuilt, never
//     a crash.
//   - Submit MUST NOT return a receipt until the event is durable at its
//     index and folded: in the data folder's write-ahead log (the tiles
//     take it behind, at exactly that index, and every start writes in
//     what they lack, never twice), or, without one, sequenced and
//     integrated by Tessera. A receipt's index and leaf hash survive
//     SIGKILL.
//   - No call acts as an actor without that actor's credential: callers
//     authenticate with Authenticate and pass the Actor it returns.
//   - One data folder is opened by at most one kernel, across processes (an
//     flock) and within a process (Tessera's POSIX lock is per process, so two
//     appenders in one process would lose entries).
package kernel
