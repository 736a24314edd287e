// Package workload is a randomized concurrent workload over every request
// kind of Annal's HTTP API, the kind storage engines are tested with.
//
// Run opens a kernel in this process on a new data folder, serves its API
// (server) on a loopback port as annald serves it (actions and the reads
// between them on internal/fastpost's path, the rest through net/http),
// and has many workers send requests through
// the Go client (client/) for a duration or a number of operations:
// agents and humans created with energy and shares, envelopes issued and
// delegated, actions committed, held, denied and sealed, holds approved and
// rejected, execute intents and their results, freezes, kills, quarantines
// and signals, sessions with their changes and deltas, sagas, rings,
// elevations and descriptors, policies, signing keys with require_signed
// turned on and off, and erasures of the subjects of sealed payloads. The
// objects are few (world.go) and the choice of each one is biased to the
// first ones, so that requests collide on them; some operations (races.go)
// send two or more requests at the same instant on purpose: an approval and
// a freeze of its agent, a kill and the freeze of the substitute its saga
// step goes to, fifty creations on a creator with one share to give.
//
// A seed makes every worker's choices repeatable (each worker draws from
// its own source derived from the seed); what the kernel answers still
// depends on timing, which is the point.
//
// What it checks, throughout and at the end (a broken check is a Failure in
// the Report; nothing is fixed or retried):
//
//   - readiness: GET /v1/readyz answers 200 from start to end;
//   - no answer is a 5xx, an "outcome unknown", a handler's panic or no
//     answer at all within 20 s (the workload pauses its workers while it
//     restarts the kernel itself); a kernel that does not close within
//     30 s is reported as stuck and left behind;
//   - each 2xx answer is what was asked (its actor, action type and target)
//     and each operation that counts (creations with shares, spending of an
//     envelope's budget) stays within what it may;
//   - at the end, with the kernel closed: the kernel's audit (what annald
//     audit runs) finds no entry that breaks a rule; the kernel opens again
//     on the folder; every acknowledged receipt and recorded denial is in
//     the log at its index, with its leaf hash, event id, actor and kind;
//     and the state the kernel kept equals a replay of the log (what annald
//     rebuild compares).
package workload
