package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"
)

// Defaults of Options.
const (
	// DefaultMaxInFlightPerOrigin bounds the add-checkpoint requests of one
	// origin being handled at once. An honest log sends one at a time per
	// witness; the bound keeps anyone replaying a log's checkpoints from
	// taking the whole commit queue.
	DefaultMaxInFlightPerOrigin = 64
	// DefaultMaxCommitBatch bounds the requests committed in one transaction.
	DefaultMaxCommitBatch = 256
	// DefaultCommitLinger bounds how long a commit group waits for more
	// requests once its first is ready: under load, or while others are
	// being checked and signed (see committer).
	DefaultCommitLinger = time.Millisecond
)

// Errors of AddCheckpoint, besides ErrMalformedRequest, ErrRequestTooLarge,
// ErrUnknownLog (404) and *ConflictError (409).
var (
	// ErrUntrustedCheckpoint: no signature by a configured key of the origin
	// verifies, or one fails (403).
	ErrUntrustedCheckpoint = errors.New("checkpoint is not signed by a trusted key of its log")
	// ErrOldSizeBeyondCheckpoint: the old size is larger than the
	// checkpoint's size (400). It wraps ErrMalformedRequest.
	ErrOldSizeBeyondCheckpoint = fmt.Errorf("%w: old size is larger than the checkpoint size", ErrMalformedRequest)
	// ErrInconsistent: the checkpoint is not proven to extend the one this
	// witness cosigned (422).
	ErrInconsistent = errors.New("checkpoint is not proven consistent with the cosigned checkpoint")
	// ErrBusy: too many requests of the origin are in flight (429).
	ErrBusy = errors.New("too many add-checkpoint requests for this log in flight")
)

// ConflictError is returned when the request's old size is not the size of
// the latest checkpoint the witness cosigned for the origin (409).
type ConflictError struct {
	Origin     string
	OldSize    uint64
	StoredSize uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("old size %d is not the size of the latest checkpoint cosigned for %q, %d", e.OldSize, abbreviate(e.Origin), e.StoredSize)
}

// Options tune a Witness. The zero value gives the defaults.
type Options struct {
	// MaxInFlightPerOrigin: DefaultMaxInFlightPerOrigin if 0.
	MaxInFlightPerOrigin int
	// MaxCommitBatch: DefaultMaxCommitBatch if 0.
	MaxCommitBatch int
	// CommitLinger: DefaultCommitLinger if 0; a negative value commits
	// what is queued without waiting for requests on their way.
	CommitLinger time.Duration
	// Logger receives one line per refused or notable request; slog.Default
	// if nil.
	Logger *slog.Logger

	// GossipTimeout bounds one gossip check (one log against one peer):
	// DefaultGossipTimeout if 0.
	GossipTimeout time.Duration
	// GossipConcurrency bounds the gossip checks run at once:
	// DefaultGossipConcurrency if 0.
	GossipConcurrency int
	// GossipTransport carries gossip's requests (peers' monitoring
	// endpoints, logs' tiles and checkpoints); http.DefaultTransport if nil.
	// Whatever it is, no answer is read past MaxGossipAnswerSize.
	GossipTransport http.RoundTripper
}

// Witness cosigns checkpoints of the logs configured in its Store.
type Witness struct {
	store    *Store
	cosigner *Cosigner
	commits  *committer
	inflight *originLimiter
	log      *slog.Logger
	metrics  *metrics
	gossip   *gossip
	// active counts the add-checkpoint requests being handled.
	active atomic.Int64
	// late keeps the late cosignature lines the monitoring endpoint adds
	// to stored notes (late_cosign.go).
	late lateLines
}

// New makes a Witness over store, signing with cosigner. The Witness does
// not own the store: Close it first, then the store.
func New(store *Store, cosigner *Cosigner, opts Options) (*Witness, error) {
	if opts.MaxInFlightPerOrigin == 0 {
		opts.MaxInFlightPerOrigin = DefaultMaxInFlightPerOrigin
	}
	if opts.MaxCommitBatch == 0 {
		opts.MaxCommitBatch = DefaultMaxCommitBatch
	}
	if opts.CommitLinger == 0 {
		opts.CommitLinger = DefaultCommitLinger
	}
	if opts.GossipTimeout == 0 {
		opts.GossipTimeout = DefaultGossipTimeout
	}
	if opts.GossipConcurrency == 0 {
		opts.GossipConcurrency = DefaultGossipConcurrency
	}
	if opts.GossipTransport == nil {
		opts.GossipTransport = http.DefaultTransport
	}
	if opts.MaxInFlightPerOrigin < 1 || opts.MaxCommitBatch < 1 || opts.GossipConcurrency < 1 || opts.GossipTimeout < 0 {
		return nil, fmt.Errorf("witness options: MaxInFlightPerOrigin %d, MaxCommitBatch %d, GossipConcurrency %d and GossipTimeout %v must be positive",
			opts.MaxInFlightPerOrigin, opts.MaxCommitBatch, opts.GossipConcurrency, opts.GossipTimeout)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := newMetrics(store, opts.Logger)
	return &Witness{
		store:    store,
		cosigner: cosigner,
		commits:  newCommitter(store, opts.MaxCommitBatch, opts.CommitLinger, func(n int) { m.groupSize.Observe(float64(n)) }),
		inflight: &originLimiter{max: opts.MaxInFlightPerOrigin, n: map[string]int{}},
		log:      opts.Logger,
		metrics:  m,
		gossip: &gossip{
			client: &http.Client{
				Transport: limitedTransport{base: opts.GossipTransport, max: MaxGossipAnswerSize},
				Timeout:   opts.GossipTimeout,
			},
			timeout:     opts.GossipTimeout,
			concurrency: opts.GossipConcurrency,
		},
	}, nil
}

// Close stops the Witness: requests still waiting to be committed fail with
// ErrClosed. It does not close the Store.
func (w *Witness) Close() { w.commits.close() }

// Cosigner is the witness's key.
func (w *Witness) Cosigner() *Cosigner { return w.cosigner }

// AddCheckpoint handles an add-checkpoint request body and returns the
// cosignature lines, once the checkpoint is durably recorded as the
// origin's latest. The checks and their order are in the package comment;
// each refusal is one of the package's errors, and refuses without changing
// any state.
func (w *Witness) AddCheckpoint(ctx context.Context, body []byte) ([]byte, error) {
	req, err := ParseAddCheckpointRequest(body)
	if err != nil {
		w.log.Debug("refused add-checkpoint", "error", err)
		return nil, err
	}
	cosignature, err := w.addCheckpoint(ctx, req)
	if err != nil {
		w.logRefusal(req, err)
	}
	return cosignature, err
}

func (w *Witness) addCheckpoint(ctx context.Context, req *AddCheckpointRequest) ([]byte, error) {
	origin := req.Checkpoint.Origin
	cfg, cfgRecord, err := w.store.logAndRecord(origin)
	if err != nil {
		return nil, err
	}
	if !w.inflight.acquire(origin) {
		return nil, fmt.Errorf("%w: %q has %d", ErrBusy, abbreviate(origin), w.inflight.max)
	}
	defer w.inflight.release(origin)
	arrived := w.commits.expect()
	defer arrived()

	// The cosignature is made outside the transaction too, in parallel
	// with other requests, and released only if the transaction takes the
	// checkpoint: signing inside it would serialise every request of a
	// group behind one goroutine. The Ed25519 line goes into the stored
	// note; the ML-DSA-44 line is made on a goroutine of its own while the
	// checkpoint is checked and committed (late_cosign.go), and, when no
	// other request is being handled, from before the log's signature is
	// checked: on an idle witness the other core is free, and otherwise
	// an unverified request must not cost a signature. Alone, with a
	// journal whose writes can be left under way (journal_aio_linux.go),
	// the line is made by this goroutine instead, while the checkpoint's
	// write is under way (commitAddition).
	recorded, late := w.cosigner.splitSigners()
	alone := w.active.Add(1) == 1
	defer w.active.Add(-1)
	ls := w.startLate(req, late, alone)

	// Signatures are checked outside the transaction, so that the slow part
	// of a request runs in parallel with others; the transaction re-checks
	// them only if the log's keys changed in between.
	opened, err := openCheckpoint(req.SignedCheckpoint, cfg)
	if err != nil {
		return nil, err
	}
	if req.OldSize > req.Checkpoint.Size {
		return nil, fmt.Errorf("%w: old size %d, checkpoint size %d", ErrOldSizeBeyondCheckpoint, req.OldSize, req.Checkpoint.Size)
	}
	ls.checked(opened)
	presigned, err := note.Sign(&note.Note{Text: opened.Text, Sigs: opened.Sigs}, recorded...)
	if err != nil {
		return nil, fmt.Errorf("cosign: %w", err)
	}
	add := &addition{req: req, cfg: cfg, cfgRecord: cfgRecord, opened: opened, presigned: presigned, signers: recorded, room: lateLinesSize(late)}
	lateDone, err := w.commitAddition(ctx, arrived, add, ls)
	if err != nil {
		return nil, err
	}
	if add.conflict != nil {
		w.recordSameSizeConflict(req, add.conflict)
	}
	if add.refusal != nil {
		return nil, add.refusal
	}
	return w.withLateLines(req, add.cosignature, lateDone)
}

// commitAddition commits add. With overlap, if no other request came in
// meanwhile, it is committed alone by this goroutine (commitAlone), and
// the late lines are made while its journal write is under way, once the
// transaction took the checkpoint; otherwise through the commit loop,
// the late lines made on a goroutine of their own unless started already
// (lateDone). It returns where the late lines come from.
func (w *Witness) commitAddition(ctx context.Context, arrived func(), add *addition, ls *lateStart) (<-chan lateResult, error) {
	if !ls.overlap || w.active.Load() != 1 {
		if ls.overlap {
			ls.done = signLate(add.opened.Text, ls.checkpoint(add.opened), ls.late)
		}
		return ls.done, w.commits.commit(ctx, arrived, add.inTx)
	}
	made := make(chan lateResult, 1)
	err := w.commits.commitAlone(arrived, add.inTx, func() {
		lines, err := checkpointSignatureLines(add.opened.Text, ls.checkpoint(add.opened), ls.late)
		made <- lateResult{lines, err}
	})
	if err == nil && add.refusal == nil && len(made) == 0 {
		return nil, errors.New("the checkpoint was recorded but its late cosignature lines were not made")
	}
	return made, err
}

// withLateLines adds to a cosignature, once its checkpoint is durably
// recorded, the late lines (none if lateDone is nil), and keeps them for
// the monitoring endpoint.
func (w *Witness) withLateLines(req *AddCheckpointRequest, cosignature []byte, lateDone <-chan lateResult) ([]byte, error) {
	if lateDone == nil {
		return cosignature, nil
	}
	res := <-lateDone
	if res.err != nil {
		return nil, res.err
	}
	w.late.put(LogID(req.Checkpoint.Origin), req.Checkpoint.Size, req.Checkpoint.Hash[:], res.lines)
	return append(cosignature, res.lines...), nil
}

// addition is an add-checkpoint request as its transaction sees it: what
// was checked and signed outside (with the log's configuration as read
// then), and what the transaction decided, set anew on each run.
type addition struct {
	req       *AddCheckpointRequest
	cfg       LogConfig
	cfgRecord []byte     // cfg as stored
	opened    *note.Note // the checkpoint opened with cfg's keys
	presigned []byte     // opened, cosigned by signers
	signers   []note.Signer
	room      int // the bytes of late lines the cosignature will be given

	cosignature []byte
	refusal     error
	conflict    *sameSizeConflict
}

// inTx is the request's change in its group's transaction. Failures up
// to the write concern this request alone: they are its refusal, and the
// others of the group go on. Only a failed write rolls the group back.
func (a *addition) inTx(g *groupTx) error {
	a.cosignature, a.refusal, a.conflict = nil, nil, nil
	origin := a.req.Checkpoint.Origin
	current, n, signed, err := a.reopen(g.tx)
	if err != nil {
		a.refusal = err
		return nil
	}
	stored, err := g.latestHead(origin)
	if err != nil {
		a.refusal = fmt.Errorf("stored checkpoint of %q: %w", abbreviate(origin), err)
		return nil
	}
	if stored != nil && stored.Size > 0 && stored.Size == a.req.Checkpoint.Size && !bytes.Equal(stored.Root, a.req.Checkpoint.Hash[:]) {
		// Refused below, whatever the old size: 422, or 409 if the old
		// size is wrong too. Either way the log signed both. (Two roots
		// of the empty tree are refused too, but no evidence format can
		// show them.) Evidence needs the whole stored record, note
		// included.
		if stored, err = g.latest(origin); err != nil {
			a.refusal = fmt.Errorf("stored checkpoint of %q: %w", abbreviate(origin), err)
			return nil
		}
		a.conflict = &sameSizeConflict{cfg: current, stored: stored, opened: n}
	}
	if a.refusal = checkExtends(stored, a.req); a.refusal != nil {
		return nil
	}
	a.cosignature = lastLinesWithRoom(signed, len(a.signers), a.room)
	return g.putLatest(&CosignedCheckpoint{
		Origin:     origin,
		Size:       a.req.Checkpoint.Size,
		Root:       a.req.Checkpoint.Hash[:],
		Note:       signed,
		CosignedAt: time.Now().UTC(),
	})
}

// reopen returns the log's configuration as the transaction reads it, the
// checkpoint opened with its keys and the note cosigned: those made
// outside the transaction, unless the log's keys changed in between; then
// the stored note keeps the signatures the current keys verify.
func (a *addition) reopen(tx *bolt.Tx) (LogConfig, *note.Note, []byte, error) {
	origin, current := a.req.Checkpoint.Origin, a.cfg
	if id := LogID(origin); !bytes.Equal(tx.Bucket(logsBucket).Get(id[:]), a.cfgRecord) {
		// Changed (or removed) since it was read: decode it again.
		var err error
		if current, err = logInTx(tx, origin); err != nil {
			return LogConfig{}, nil, nil, err
		}
	}
	if slices.Equal(current.Keys, a.cfg.Keys) {
		return current, a.opened, a.presigned, nil
	}
	n, err := openCheckpoint(a.req.SignedCheckpoint, current)
	if err != nil {
		return LogConfig{}, nil, nil, err
	}
	signed, err := note.Sign(&note.Note{Text: n.Text, Sigs: n.Sigs}, a.signers...)
	if err != nil {
		return LogConfig{}, nil, nil, fmt.Errorf("cosign: %w", err)
	}
	return current, n, signed, nil
}

// sameSizeConflict is a request whose checkpoint, signed by the log, has
// the size of the stored one and another root.
type sameSizeConflict struct {
	cfg    LogConfig
	stored *CosignedCheckpoint
	opened *note.Note
}

// recordSameSizeConflict turns a sameSizeConflict into evidence, before the
// request is answered. Failures are logged by recordEvidence: the request's
// refusal stands either way.
func (w *Witness) recordSameSizeConflict(req *AddCheckpointRequest, c *sameSizeConflict) {
	ours, err := w.ownSighting(LogStatus{LogConfig: c.cfg, Latest: c.stored})
	if err != nil {
		w.log.Error("stored checkpoint unreadable", "origin", c.cfg.Origin, "error", err)
		return
	}
	theirs, err := observe(c.opened, req.Checkpoint, w.cosigner.Name(), time.Now())
	if err != nil {
		w.log.Error("re-encode checkpoint", "origin", c.cfg.Origin, "error", err)
		return
	}
	w.recordEvidence(c.cfg, split{small: ours, large: theirs}, EvidenceFromAddCheckpoint)
}

// openCheckpoint verifies the checkpoint note against the log's keys.
func openCheckpoint(signed []byte, cfg LogConfig) (*note.Note, error) {
	list, err := cfg.verifierList()
	if err != nil {
		return nil, err
	}
	counts := signatureCounts(signed)
	for _, v := range list {
		if counts[signatureKey{v.Name(), v.KeyHash()}] > 1 {
			return nil, fmt.Errorf("%w: the checkpoint has %d signature lines by configured key %q (ID %08x); only one can be checked", ErrUntrustedCheckpoint, counts[signatureKey{v.Name(), v.KeyHash()}], v.Name(), v.KeyHash())
		}
	}
	n, err := note.Open(signed, note.VerifierList(list...))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return nil, fmt.Errorf("%w: no signature by a configured key of %q", ErrUntrustedCheckpoint, abbreviate(cfg.Origin))
	case errors.As(err, &invalid):
		return nil, fmt.Errorf("%w: the signature by configured key %q (ID %08x) does not verify", ErrUntrustedCheckpoint, invalid.Name, invalid.Hash)
	case err != nil:
		// ParseSignedCheckpoint has already checked the note's shape, so
		// this is a verifier's own refusal, such as an ambiguous key.
		return nil, fmt.Errorf("%w: %v", ErrMalformedRequest, err)
	}
	return n, nil
}

// checkExtends is the compare-and-swap's compare: it refuses a request
// whose old size is not the stored size, or whose checkpoint is not proven
// to extend the stored one. stored is nil if the witness never cosigned for
// the origin, which counts as size 0.
func checkExtends(stored *CosignedCheckpoint, req *AddCheckpointRequest) error {
	var storedSize uint64
	var storedRoot []byte
	if stored != nil {
		storedSize, storedRoot = stored.Size, stored.Root
	}
	cp := req.Checkpoint
	if req.OldSize != storedSize {
		return &ConflictError{Origin: cp.Origin, OldSize: req.OldSize, StoredSize: storedSize}
	}
	switch {
	case req.OldSize == 0:
		// Every tree extends the empty one, so there is nothing to prove:
		// the spec requires the proof to be empty.
		if len(req.Proof) != 0 {
			return fmt.Errorf("%w: old size is 0 but the request has %d consistency proof lines; a proof from the empty tree MUST be empty", ErrInconsistent, len(req.Proof))
		}
		if empty := rfc6962.DefaultHasher.EmptyRoot(); cp.Size == 0 && !bytes.Equal(cp.Hash[:], empty) {
			return fmt.Errorf("%w: checkpoint of size 0 has root %s, but the empty tree's root is %s", ErrInconsistent, b64(cp.Hash[:]), b64(empty))
		}
		return nil
	case req.OldSize == cp.Size && !bytes.Equal(cp.Hash[:], storedRoot):
		return fmt.Errorf("%w: the log signed size %d with root %s, but this witness cosigned root %s for that size", ErrInconsistent, cp.Size, b64(cp.Hash[:]), b64(storedRoot))
	}
	hashes := make([][]byte, len(req.Proof))
	for i := range req.Proof {
		hashes[i] = req.Proof[i][:]
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, req.OldSize, cp.Size, hashes, storedRoot, cp.Hash[:]); err != nil {
		return fmt.Errorf("%w: consistency proof from size %d to %d does not verify: %v", ErrInconsistent, req.OldSize, cp.Size, err)
	}
	return nil
}

// logRefusal logs a refused request. A refusal for inconsistency comes
// with a valid log signature, so it may be a proof of log misbehaviour:
// it is logged loudly, with the checkpoint.
func (w *Witness) logRefusal(req *AddCheckpointRequest, err error) {
	attrs := []any{"origin", req.Checkpoint.Origin, "old_size", req.OldSize, "size", req.Checkpoint.Size, "error", err}
	if errors.Is(err, ErrInconsistent) {
		w.log.Error("refused an inconsistent checkpoint signed by the log", append(attrs, "checkpoint", string(req.SignedCheckpoint))...)
		return
	}
	w.log.Debug("refused add-checkpoint", attrs...)
}

// lastLines returns the last n lines of b, newlines included.
func lastLines(b []byte, n int) []byte { return lastLinesWithRoom(b, n, 0) }

// lastLinesWithRoom is lastLines in a slice with room for room more bytes.
func lastLinesWithRoom(b []byte, n, room int) []byte {
	i := len(b) - 1
	for ; n > 0 && i >= 0; n-- {
		i = bytes.LastIndexByte(b[:i], '\n')
	}
	return append(make([]byte, 0, len(b)-i-1+room), b[i+1:]...)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// originLimiter counts requests in flight per origin.
type originLimiter struct {
	mu  sync.Mutex
	max int
	n   map[string]int
}

func (l *originLimiter) acquire(origin string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[origin] >= l.max {
		return false
	}
	l.n[origin]++
	return true
}

func (l *originLimiter) release(origin string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[origin]--; l.n[origin] == 0 {
		delete(l.n, origin)
	}
}
