// Package witness is Annal's transparency log witness: it cosigns
// checkpoints of the logs it is configured for, speaking
// c2sp.org/tlog-witness over HTTP and signing c2sp.org/tlog-cosignature
// cosignature/v1 (Ed25519, signature type 0x04) and, when its Cosigner has
// the key (annal-witness makes one by default), ML-DSA-44 (type 0x06):
// then each answer is two signature lines, one per key, both bearing the
// witness's name, and a policy may name the witness by either key.
//
// # Contract
//
// A Witness MUST NOT cosign two checkpoints of one origin that are not
// consistent with each other, across restarts. To keep that promise:
//
//   - The latest cosigned checkpoint of each origin is stored in a bbolt file
//     (see Store), with those recorded since it was last written held in a
//     journal beside it (journal.go) and in memory. An add-checkpoint
//     request is checked against it and the new checkpoint recorded by one
//     commit group at a time: a compare-and-swap on the stored size. Groups
//     run one after the other, so two requests from the same old size can
//     never both pass; the second sees the first's write and gets 409.
//   - The answer is sent only after the group's journal write is durable
//     (fdatasynced, or written O_DIRECT|O_DSYNC), so a cosignature is never handed out for a state that a
//     crash could roll back. The journal is copied into bbolt (a synced
//     transaction) when it fills, when the store opens or closes, and
//     before a log is removed.
//   - The ML-DSA-44 line of a cosignature is made beside the commit and is
//     not in the stored note; the monitoring endpoint adds it
//     (late_cosign.go). A request alone is committed by its own goroutine,
//     which makes the line while the checkpoint's journal write is under
//     way (native AIO on Linux) and only if the transaction took the
//     checkpoint. Both lines are answered only once the checkpoint is
//     durable.
//   - Concurrent requests are committed in groups (one journal write, one
//     fdatasync, many requests, applied in order), which gives throughput
//     without giving up the ordering above. A group waits at most
//     Options.CommitLinger for more, and only under load or while other
//     requests are being checked and signed; a lone request is committed
//     at once.
//   - Gossip reads the cosigned state and never changes it: what a peer
//     serves can produce evidence or a logged failure, never a
//     cosignature or a change of the stored checkpoint.
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
// peers fetch for gossip. 404 if the witness never cosigned one. The
// stored note keeps the log's signature so that two conflicting
// checkpoints, each signed by the log, can be put side by side offline.
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
// # Peers and gossip
//
// Peers are other witnesses, each a base URL and a cosignature/v1 verifier
// key (Ed25519, type 0x04, or ML-DSA-44, type 0x06); a peer is named after
// its key. They are kept
// in the bbolt file beside the logs and changed the same way, with
// `annal-witness peers add|list|remove`, directly or through the admin
// socket. At most MaxPeers.
//
// Witnesses offer their checkpoints by being pulled: a round fetches, for
// each peer and each log this witness has cosigned, the peer's monitoring
// endpoint GET <URL>/<hex SHA-256(origin)>/checkpoint. Nothing is pushed:
// the monitoring endpoint already serves every peer, a push endpoint
// would be one more thing to authenticate and bound, and add-checkpoint
// cannot carry a peer's checkpoint without making this witness cosign it.
// Gossip is therefore one-way per listing; two witnesses that list each
// other both check.
//
// Witnesses without a monitoring endpoint (omniwitness and litewitness
// answer 404) are read through the logs instead: when a peer answers 404
// for a log, the log's own published checkpoint (<TileURL>/checkpoint) is
// used if it carries a valid cosignature by the peer — a log publishes the
// cosignatures its witness policy collected. A peer that answers 404 for
// every log of a round with no log publishing its cosignature checks
// nothing: the round names it (GossipReport.NoMonitoring) and a warning is
// logged when that starts.
//
// Each answer is bounded (MaxGossipAnswerSize; every gossip request goes
// through a transport that cuts longer bodies, Options.GossipTimeout bounds
// a check, Options.GossipConcurrency the checks at once) and parsed as
// strictly as an add-checkpoint checkpoint: it MUST be a checkpoint of the
// log's origin with a valid signature by a configured key of the log and
// none failing, or it is a failed check (logged, counted), never evidence.
// The peer's own cosignature is checked but optional: kept if it verifies,
// dropped otherwise. Then, against this witness's latest cosigned
// checkpoint of the log:
//
//   - same size and root: consistent; same size, another root:
//     equivocation. No tiles needed.
//   - different sizes: the log's tiles (LogConfig.TileURL, c2sp.org/tlog-tiles)
//     are read with Tessera's client: the roots of the tiles' tree at both
//     sizes (from the hashes of its compact ranges) and the consistency
//     proof between them (ProofBuilder at the larger size), a few tiles per
//     size, never the entries. The proof is checked against the two roots,
//     so tiles contradicting themselves prove nothing. If the tiles' tree
//     has the larger checkpoint's root, the smaller checkpoint is consistent
//     if it has the tiles' root at its size and an equivocation otherwise.
//   - if instead the tiles follow the smaller checkpoint but contradict the
//     larger one at its own size, the tiles cannot prove anything against
//     the larger root, which the format requires. The witness then reads the
//     log's own checkpoint (<tile URL>/checkpoint): if the log signed it, it
//     is at least the larger size, and the tiles give its root, it and the
//     larger checkpoint are the equivocation, with the proof from the larger
//     size to it (no proof when the sizes are equal). Both are then signed
//     by the log, as evidence requires; otherwise the check fails.
//   - tiles missing or matching neither checkpoint: a failed check, logged
//     at warning level, not evidence.
//
// Tiles are fetched as Tessera's client does (the partial tile of a size,
// else the full tile) and, failing both, as the wider partial tile of the
// log's current size, for sizes the log never published, such as a hidden
// fork's. Pairs of trees found consistent or split are remembered for one
// round, so a quiet network costs one small fetch per peer and log.
// Witness.Gossip runs one round now; Witness.RunGossip runs one every
// interval (`serve --gossip-interval`, DefaultGossipInterval).
//
// # Equivocation evidence
//
// An equivocation becomes an evidence file in the format of
// testvectors/FORMATS.md, "Equivocation evidence" (declared once, for the
// witness and the verifier, in format/evidence), that `annal-verify
// evidence` checks offline: the two checkpoints, smaller
// first, each with the log's signature (and only signatures that verified:
// the log's and witnesses' cosignatures), the log's key, and when the sizes
// differ the larger tree's root at the smaller size and the consistency
// proof; observations say which witness saw each checkpoint and when. The
// witness MUST NOT keep a file the verifier would refuse: it checks each
// file by the format's rules before storing it (its own reading, since this
// package does not import the verifier). The format needs one Ed25519 key
// named after the origin that signed both; a log trusted under another key
// name has its equivocations logged at error level with both checkpoints,
// but no file.
//
// Evidence is also made from add-checkpoint: a request whose checkpoint,
// signed by the log, has the stored checkpoint's size and another root
// (answered 422, or 409 if its old size is wrong too) is recorded before
// the answer.
//
// Each file is named by its ID, the hex SHA-256 of the origin and the two
// (size, root) pairs in order, so the same split seen again, or by another
// witness, is one file: the first one stored stays, unchanged. Files are
// stored in the bbolt file (at most MaxEvidencePerLog per log; beyond, only
// logged), listed at GET /evidence, served at GET /evidence/<ID>, printed
// by `annal-witness evidence list|get`, counted in /metrics
// (annal_witness_equivocation_evidence_total by source,
// annal_witness_evidence_files stored) and logged at error level with
// "LOG EQUIVOCATION".
package witness
