// Package witness is Annal's transparency log witness: it cosigns
// checkpoints of the logs it is configured for, speaking
// c2sp.org/tlog-witness over HTTP and signing c2sp.org/tlog-cosignature
// cosignature/v1 (Ed25519, signature type 0x04).
//
// # Contract
//
// A Witness MUST NOT cosign two checkpoints of one origin that are not
// consistent with each other, across restarts. To keep that promise:
//
//   - The latest cosigned checkpoint of each origin is stored in a bbolt file
//     (see Store). An add-checkpoint request is checked against it and the
//     new checkpoint written in one bbolt read-write transaction: a
//     compare-and-swap on the stored size. bbolt allows one writer at a time,
//     so two requests from the same old size can never both pass; the second
//     sees the first's write and gets 409.
//   - The answer is sent only after that transaction has committed, and a
//     bbolt commit is fsynced, so a cosignature is never handed out for a
//     state that a crash could roll back.
//   - Concurrent requests are committed in groups (one transaction, one
//     fsync, many requests, applied in order), which gives throughput
//     without giving up the ordering above.
//
// # add-checkpoint
//
// POST /add-checkpoint takes the body of c2sp.org/tlog-witness:
//
//	old <size>\n
//	[<base64 consistency proof hash>\n]...
//	\n
//	<checkpoint signed note>
//
// and answers, checking in this order:
//
//   - 413 if the body is longer than MaxRequestSize; 400 if it breaks the
//     format or a limit (MaxLineLength, MaxProofLines, MaxSignatureLines),
//     with a message naming the rule;
//   - 404 if the checkpoint's origin is not configured;
//   - 403 if no signature by a configured key of that origin verifies, or if
//     a signature by a configured key fails;
//   - 400 if the old size is larger than the checkpoint size;
//   - 409 if the old size is not the size of the latest checkpoint this
//     witness cosigned for the origin (0 if none). The body is that size in
//     decimal and a newline, with Content-Type exactly "text/x.tlog.size";
//   - 422 if the consistency proof does not prove the checkpoint extends the
//     cosigned one: a bad or missing proof, a non-empty proof with old size
//     0, a size-0 checkpoint whose root is not the empty tree's, or the same
//     size as the cosigned checkpoint with a different root;
//   - 200 otherwise, with one cosignature/v1 note signature line per witness
//     key ("— <name> <base64>\n"), Content-Type "text/plain; charset=utf-8"
//     (the spec names none for this answer).
//
// Besides the spec's codes: 429 once the origin is known, if
// Options.MaxInFlightPerOrigin requests of it are already in flight, and
// 503 once the Witness is closed.
//
// The same-size, different-root case: the spec's text names 409 for it,
// while its consistency rule (a proof between two equal sizes is empty and
// holds only if the roots are equal) names 422, and both apply. This
// witness answers 422, as litewitness does: the request is not a stale view
// of the witness (which 409 with text/x.tlog.size tells the client to fix
// by retrying), it is two different trees of one size signed by the log,
// and a client that retried on it would loop. The log signed both, so the
// request is logged at error level with the checkpoint: it is the raw
// material of equivocation evidence.
//
// # Monitoring
//
// GET /<lowercase hex SHA-256(origin)>/checkpoint answers the latest
// checkpoint this witness cosigned for that origin: the note text, the
// log's verified signatures and this witness's cosignature. It is what
// peers fetch for gossip. 404 if the witness never cosigned one.
//
// # Log configuration
//
// The logs a witness serves (origin, one or more log verifier keys, and an
// optional tile URL for gossip) are kept in the same bbolt file as the
// cosigned checkpoints, changed with `annal-witness logs add|list|remove`,
// not read from a config file. The reasons:
//
//   - The trust configuration and the safety state must agree. A log removed
//     and re-added (say with a typo'd key fixed) keeps its cosigned state
//     unless the operator asks to forget it; with a config file, editing a
//     line can silently detach a log from its history or leave state for a
//     log nobody configured.
//   - Changes are validated before they are stored (keys parse, no
//     duplicates, the URL is absolute) and applied in one transaction,
//     while a running witness sees them on the next request: no reload
//     signal, no half-read file.
//   - The commands work whether the witness runs or not. Stopped, they open
//     the bbolt file themselves. Running, the bbolt file is locked, so they
//     go through an admin API on a Unix socket in the data folder
//     (AdminSocketName), mode 0600: only the account that owns the witness
//     can change which keys it trusts. A loopback TCP port would let any
//     local user swap a log's key.
//
// # Later steps
//
// Gossip and equivocation evidence are built on this state: the stored
// note keeps the log's signature so that two conflicting checkpoints,
// each signed by the log, can be put side by side offline; the tile URL
// lets a witness build consistency proofs between its view and a peer's.
package witness
