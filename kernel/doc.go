// Package kernel is Annal's sovereignty kernel: the sole committer of agent
// actions. Every action passes the pipeline of the paper (§5.2: validate,
// quote, reserve, validate_payload, settle, append, receipt) and, if it
// passes, becomes one event in a Tessera tile log.
//
// Contracts:
//   - The log is the source of truth. Kernel state in bbolt is a materialised
//     view of it: a fold of the log's events in index order. Folding is
//     idempotent, so after a crash at any instant the kernel folds again from
//     its last recorded position and reaches the state a fresh replay gives.
//   - Submit MUST NOT return a receipt until the event is durably sequenced
//     and integrated: a receipt's index and leaf hash survive SIGKILL.
//   - No call acts as an actor without that actor's credential: callers
//     authenticate with Authenticate and pass the Actor it returns.
//   - One data folder is opened by at most one kernel, across processes (an
//     flock) and within a process (Tessera's POSIX lock is per process, so two
//     appenders in one process would lose entries).
package kernel
