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
//   - Execution control (Agent Hypervisor Execution Control 1.0, Agent OS
//     policies) is a set of gates on the same pipeline, in one documented
//     order (controlgates.go), and every gate fails closed. Every decision
//     that changes what an agent may do — ring, elevation, session state,
//     quarantine, kill, saga step, policy, signal — is an event, so replay
//     reproduces it; expiries are compared with the clock at each decision
//     and only recorded afterwards, so a late tick never extends them.
//   - One data folder is opened by at most one kernel, across processes (an
//     flock) and within a process (Tessera's POSIX lock is per process, so two
//     appenders in one process would lose entries).
package kernel
