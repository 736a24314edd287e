// Package history is the kernel's read side: the state file, the fold of
// the log into a ledger, and the ways the history is read back.
//
// It holds the state file (store.go: the folded ledger's objects, the
// record of how far it folded, and the history index, written in one
// transaction), the fold of log entries into a ledger with tolerated
// entries passed over (FoldLog, fold.go), history pages (Find, index.go),
// audit bundles (Export), the offline audit of a log from its tiles
// (Audit) and the rebuild of the state file from the log alone (Rebuild).
//
// It reads the log through kernel/internal/logstore and judges entries by
// the rules of kernel/internal/ledger; it decides nothing and appends
// nothing. Who may read which history is the kernel's to say: Find is
// handed the actors a page may show.
//
// Contracts:
//   - The state file is a cache of the log: it is checked against the log
//     on open, and one that does not match is set aside and folded again,
//     never trusted and never a crash.
//   - The history index only proposes candidates; every filter is checked
//     against the event itself, so a damaged index can hide an event but
//     never show one a query did not ask for.
//   - Audit and Rebuild change nothing but what they name: Audit nothing
//     anywhere, Rebuild the state file.
package history
