package logstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/internal/atomicfile"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
	"golang.org/x/mod/sumdb/note"
)

// Log is the kernel's view of its Tessera POSIX log: append, read back,
// and build proofs from tiles.
type Log struct {
	group *groupCommitter
	// wa, if set, is the write-ahead log in front of the tiles
	// (writeahead.go): entries are durable, and readable, before they are
	// in the tiles.
	wa       *WriteAhead
	Reader   tessera.LogReader
	awaiter  *tessera.PublicationAwaiter
	shutdown func(context.Context) error
	Verifier note.Verifier
	cancel   context.CancelFunc
	cp       verifiedCheckpoint
	// stopGC stops the garbage collector; gcDone closes when it has.
	stopGC context.CancelFunc
	gcDone chan struct{}
	// proofs builds proofs from cached tiles (proofcache.go), made on
	// first use.
	proofsOnce sync.Once
	proofs     *residentProofs
	// path is the log folder of the data folder (for a shared log, where
	// Tessera keeps nothing); onDisk says the log lives there.
	path   string
	onDisk bool
}

// checkpointGrace is how long, from the first published checkpoint that
// does not verify, latestCheckpoint serves the last one that did.
const checkpointGrace = 5 * time.Second

// verifiedCheckpoint remembers the last published checkpoint that verified,
// and since when reads have failed to verify.
type verifiedCheckpoint struct {
	now    func() time.Time
	logger *slog.Logger
	mu     sync.Mutex
	last   *checkpoints.SignedCheckpoint
	// changed is when a checkpoint other than last was first seen.
	changed time.Time
	failed  time.Time // zero while the latest read verified
	gaveUp  bool      // failing for longer than checkpointGrace
	// readAt is when last was last read from storage and verified.
	readAt time.Time
}

// LogOptions are the settings of the tile log: the kernel's Config says
// what each means.
type LogOptions struct {
	Storage            Storage
	BatchMaxSize       uint
	BatchMaxAge        time.Duration
	CheckpointInterval time.Duration
	GCInterval         time.Duration
	MaxOutstanding     uint
	WitnessPolicy      []byte
	WitnessTimeout     time.Duration
	Now                func() time.Time
	Logger             *slog.Logger
	// WrapAdd, if set, wraps Tessera's Add: tests use it to make appends
	// fail.
	WrapAdd func(tessera.AddFn) tessera.AddFn
}

func OpenLog(path string, signer note.Signer, verifier note.Verifier, cfg LogOptions, witnesses *WitnessWatch, wa *WriteAhead) (*Log, error) {
	ctx, cancel := context.WithCancel(context.Background())
	var witnessClient *http.Client
	if witnesses != nil {
		witnessClient = &http.Client{Transport: witnesses}
	}
	driver, wrapReader, err := cfg.Storage.driver(ctx, path, witnessClient)
	if err != nil {
		cancel()
		return nil, err
	}
	gcInterval := cfg.GCInterval
	if cfg.Storage.OnDisk() {
		// The kernel collects garbage itself (gcLoop), so that Close can
		// wait for it: Tessera's collector may still be removing files
		// after its shutdown returns. In a bucket Tessera's own collector
		// works under a database lock, and a removal cut short is redone.
		gcInterval = 0
	}
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(signer).
		WithBatching(cfg.BatchMaxSize, cfg.BatchMaxAge).
		WithCheckpointInterval(cfg.CheckpointInterval).
		WithGarbageCollectionInterval(gcInterval).
		WithPushback(cfg.MaxOutstanding)
	if len(cfg.WitnessPolicy) > 0 {
		group, err := tessera.NewWitnessGroupFromPolicy(cfg.WitnessPolicy)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("witness policy: %w", err)
		}
		opts = opts.WithWitnesses(group, &tessera.WitnessOptions{Timeout: cfg.WitnessTimeout})
	}
	appender, shutdown, reader, err := tessera.NewAppender(ctx, driver, opts)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("tessera appender: %w", err)
	}
	poll := min(cfg.CheckpointInterval/4, 25*time.Millisecond)
	add := appender.Add
	if !cfg.Storage.OnDisk() {
		add = classifiedAWSAdd(add)
	}
	if cfg.WrapAdd != nil {
		add = cfg.WrapAdd(add)
	}
	reader = wrapReader(reader)
	write := tesseraWriter(add)
	if wa != nil {
		write = wa.write
	}
	l := &Log{
		wa:       wa,
		group:    newGroupCommitter(write, int(cfg.BatchMaxSize), int(cfg.MaxOutstanding)),
		Reader:   reader,
		awaiter:  tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, poll),
		shutdown: shutdown,
		Verifier: verifier,
		cancel:   cancel,
		cp:       verifiedCheckpoint{now: cfg.Now, logger: cfg.Logger},
		gcDone:   make(chan struct{}),
		path:     path,
		onDisk:   cfg.Storage.OnDisk(),
	}
	gcCtx, stopGC := context.WithCancel(ctx)
	l.stopGC = stopGC
	if cfg.Storage.OnDisk() {
		go l.gcLoop(gcCtx, path, cfg.GCInterval, cfg.Logger)
	} else {
		close(l.gcDone)
	}
	return l, nil
}

func (l *Log) Close(ctx context.Context) error {
	l.proofTiles().stop()
	l.stopGC()
	<-l.gcDone
	l.group.close(ctx)
	var errs []error
	if l.wa != nil {
		err := l.wa.close(ctx)
		errs = append(errs, err)
		// Tessera was handed no entry, so its shutdown waits for no
		// checkpoint: wait here, as it would, for one that covers the tiles.
		if size, serr := l.Reader.IntegratedSize(ctx); err == nil && serr == nil && size > 0 {
			if _, err := l.AwaitPublished(ctx, size-1); err != nil {
				errs = append(errs, fmt.Errorf("await a checkpoint of the last entries: %w", err))
			}
		}
	}
	errs = append(errs, l.shutdown(ctx))
	l.cancel()
	// Tessera has stopped: what a write it gave up on left behind goes.
	if l.onDisk {
		if _, err := RemoveTempFiles(l.path); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// maxGCBundles bounds one garbage collection pass, as Tessera bounds its.
const maxGCBundles = 100

// gcLoop removes, every interval, the partial tiles and entry bundles that
// full ones have replaced below the published checkpoint: what Tessera's
// POSIX collector does (storage/posix garbageCollect, whose progress file
// .state/gcState it keeps), but in a goroutine close waits for, so that no
// file of the log is removed after Close returns.
func (l *Log) gcLoop(ctx context.Context, root string, interval time.Duration, logger *slog.Logger) {
	defer close(l.gcDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cp, err := l.LatestCheckpoint(ctx)
		if err != nil {
			continue
		}
		if err := collectGarbage(root, cp.Size, maxGCBundles); err != nil {
			logger.Warn("removing replaced partial tiles", "err", err)
		}
	}
}

// gcStatePath is Tessera's record of how far garbage collection got.
var gcStatePath = filepath.Join(".state", "gcState")

// collectGarbage removes the partial versions of the full entry bundles
// and tiles of a tree of treeSize, from where the last pass stopped, at
// most maxBundles bundles (and the tiles above them) at a time.
func collectGarbage(root string, treeSize uint64, maxBundles int) error {
	done, err := readGCState(root)
	if err != nil {
		return err
	}
	if done >= treeSize {
		return nil
	}
	from, bundles := done, 0
	for ri := range layout.Range(done, treeSize-done, treeSize) {
		if ri.Partial > 0 || bundles >= maxBundles {
			break
		}
		if err := removeReplacedPartials(root, ri.Index); err != nil {
			return err
		}
		from += uint64(ri.N)
		bundles++
	}
	if from == done {
		return nil
	}
	return writeGCState(root, from)
}

// gcState is Tessera's record of how far garbage collection got: every
// bundle below FromSize has had its partials removed.
type gcState struct {
	FromSize uint64 `json:"fromSize"`
}

func readGCState(root string) (uint64, error) {
	var state gcState
	raw, err := os.ReadFile(filepath.Join(root, gcStatePath))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, err
	}
	if err := json.Unmarshal(raw, &state); err != nil {
		return 0, fmt.Errorf("%s: %v", gcStatePath, err)
	}
	return state.FromSize, nil
}

func writeGCState(root string, fromSize uint64) error {
	out, err := json.Marshal(gcState{fromSize})
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(root, gcStatePath), bytes.NewReader(out), 0o644)
}

// removeReplacedPartials removes the partial versions of full entry bundle
// index, of its level-0 tile, and of the tiles above whose last child that
// tile is (they are full now too).
func removeReplacedPartials(root string, index uint64) error {
	if err := removePartial(root, layout.EntriesPath(index, 0)); err != nil {
		return err
	}
	if err := removePartial(root, layout.TilePath(0, index, 0)); err != nil {
		return err
	}
	for level := uint64(0); index%layout.TileWidth == layout.TileWidth-1; {
		level, index = level+1, index>>layout.TileHeight
		if err := removePartial(root, layout.TilePath(level, index, 0)); err != nil {
			return err
		}
	}
	return nil
}

// removePartial removes the partial versions of the full file at p.
func removePartial(root, p string) error {
	if err := os.RemoveAll(filepath.Join(root, p+".p")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Append adds an entry and returns its index once it is durable: in the
// write-ahead log (the tiles take it behind), or without one once
// Tessera's POSIX future has resolved (sequenced and integrated).
// folded, if set, is called once the kernel has folded the entry. The
// result's Index is the entry's, Written when its group was written.
func (l *Log) Append(ctx context.Context, entry []byte, ev *event.Event, folded func()) CommitResult {
	return l.group.append(ctx, entry, ev, folded)
}

// Size is the number of entries durably in the log: with a write-ahead
// log, also those not yet in the tiles.
func (l *Log) Size(ctx context.Context) (uint64, error) {
	if l.wa != nil {
		return l.wa.next(), nil
	}
	return l.IntegratedSize(ctx)
}

// IntegratedSize is the number of entries durably in the tree, which may be
// ahead of the latest checkpoint.
func (l *Log) IntegratedSize(ctx context.Context) (uint64, error) {
	return l.Reader.IntegratedSize(ctx)
}

// LatestCheckpoint reads and verifies the published checkpoint.
//
// Tessera's POSIX driver replaces the checkpoint file whole (a temporary
// file renamed over it) with a checkpoint it has just signed, so a read
// that does not verify is not expected. Should one fail all the same (a
// read that raced the replacement on a file system whose rename is not
// atomic to readers, or a file changed behind Tessera's back), the file is
// read once more. If that fails too, the last checkpoint that verified is
// served instead, and an error is logged: it is a checkpoint of this log
// signed by its key, only older, so every proof against it holds, and an
// entry it does not cover is answered ErrNotPublished (retry). That lasts at
// most checkpointGrace from the first failure: a checkpoint that stays
// unverifiable, corrupted on disk or signed by another key, then makes
// every read fail with the verification error, and keeps doing so until a
// verifiable checkpoint is published. It is never hidden for longer.
func (l *Log) LatestCheckpoint(ctx context.Context) (*checkpoints.SignedCheckpoint, error) {
	cp, err := l.readCheckpoint(ctx)
	if err != nil && ctx.Err() == nil {
		cp, err = l.readCheckpoint(ctx)
	}
	return l.cp.settle(cp, err)
}

func (l *Log) readCheckpoint(ctx context.Context) (*checkpoints.SignedCheckpoint, error) {
	raw, err := l.Reader.ReadCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	// The same bytes as the last checkpoint that verified verify again:
	// a proof request need not check an Ed25519 signature each time.
	if last := l.cp.lastVerified(); last != nil && bytes.Equal(last.Raw, raw) {
		return last, nil
	}
	return checkpoints.OpenCheckpoint(raw, l.Verifier)
}

// ProofCheckpoint is the checkpoint an inclusion proof of index is built
// against: the one LatestCheckpoint answered less than checkpointReuse ago
// if it covers index, else LatestCheckpoint. Reading the checkpoint file
// (open, stat, two reads, close) was a sixth of a proof's handling; at
// thousands of proofs a second most of those reads found the same bytes.
// A proof carries its checkpoint, so one against a checkpoint a few
// milliseconds older holds all the same; an entry it does not cover is
// always looked up afresh, so no entry is answered "not published" for
// the reuse.
func (l *Log) ProofCheckpoint(ctx context.Context, index uint64) (*checkpoints.SignedCheckpoint, error) {
	if cp := l.cp.recent(checkpointReuse); cp != nil && index < cp.Size {
		return cp, nil
	}
	return l.LatestCheckpoint(ctx)
}

// checkpointReuse bounds how old a checkpoint ProofCheckpoint reuses may
// be: well under the shortest checkpoint interval anyone sets.
const checkpointReuse = 5 * time.Millisecond

// recent is the last checkpoint read and verified less than within ago,
// while reads verify; nil otherwise.
func (v *verifiedCheckpoint) recent(within time.Duration) *checkpoints.SignedCheckpoint {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.last == nil || !v.failed.IsZero() || v.now().Sub(v.readAt) >= within {
		return nil
	}
	return v.last
}

// lastVerified is the last published checkpoint that verified, or nil.
func (v *verifiedCheckpoint) lastVerified() *checkpoints.SignedCheckpoint {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.last
}

// settle records the outcome of reading the published checkpoint and says
// what to answer: cp when it verified, else the last verified checkpoint
// within the grace period, else err.
func (v *verifiedCheckpoint) settle(cp *checkpoints.SignedCheckpoint, err error) (*checkpoints.SignedCheckpoint, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err == nil {
		if !v.failed.IsZero() {
			v.logger.Info("published checkpoint verifies again", "size", cp.Size, "after", v.now().Sub(v.failed))
			v.failed, v.gaveUp = time.Time{}, false
		}
		if v.last == nil || cp.Size >= v.last.Size {
			if v.last == nil || !bytes.Equal(v.last.Raw, cp.Raw) {
				v.changed = v.now()
			}
			v.last = cp
			v.readAt = v.now()
		}
		return cp, nil
	}
	if errors.Is(err, os.ErrNotExist) || v.last == nil {
		return nil, err
	}
	now := v.now()
	if v.failed.IsZero() {
		v.failed = now
		v.logger.Error("published checkpoint does not verify; serving the last one that did", "size", v.last.Size, "grace", checkpointGrace, "err", err)
	}
	if since := now.Sub(v.failed); since > checkpointGrace {
		if !v.gaveUp {
			v.gaveUp = true
			v.logger.Error("published checkpoint still does not verify; reads now fail", "for", since, "err", err)
		}
		return nil, fmt.Errorf("the published checkpoint has not verified for %v: %w", since.Round(time.Millisecond), err)
	}
	return v.last, nil
}

// AwaitPublished blocks until a published checkpoint covers index, and
// returns that checkpoint. One that does not verify is handled as
// latestCheckpoint handles it.
func (l *Log) AwaitPublished(ctx context.Context, index uint64) (*checkpoints.SignedCheckpoint, error) {
	_, raw, err := l.awaiter.Await(ctx, func() (tessera.Index, error) { return tessera.Index{Index: index}, nil })
	if err != nil {
		return nil, err
	}
	cp, err := checkpoints.OpenCheckpoint(raw, l.Verifier)
	if err != nil {
		return l.LatestCheckpoint(ctx)
	}
	return l.cp.settle(cp, nil)
}

// ReadTile reads a tile of at least width p (0: full). Hashes in a tile never
// change once written, so a wider tile serves a narrower request: a partial
// tile that the garbage collector removed, or that no checkpoint asked for,
// is served from the full tile or the current, wider partial.
func (l *Log) ReadTile(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
	t, err := l.Reader.ReadTile(ctx, level, index, p)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return t, err
	}
	size, serr := l.Reader.IntegratedSize(ctx)
	if serr != nil {
		return nil, serr
	}
	w := layout.PartialTileSize(level, index, size)
	if w == 0 || w < p {
		return nil, err
	}
	return l.Reader.ReadTile(ctx, level, index, w)
}

// ReadEntry returns entry index, which must be sequenced: one sequenced but
// not yet in the tree (Tessera's AWS driver integrates once a second) is
// waited for.
func (l *Log) ReadEntry(ctx context.Context, index uint64) ([]byte, error) {
	if l.wa != nil {
		if entry, ok, err := l.wa.tailEntry(index); ok {
			return entry, err
		}
	}
	size, err := l.WaitIntegrated(ctx, index+1)
	if err != nil {
		return nil, err
	}
	if index >= size {
		return nil, fmt.Errorf("entry %d: %w (log size is %d)", index, os.ErrNotExist, size)
	}
	bundle, err := l.ReadBundle(ctx, index/layout.EntryBundleWidth, size)
	if err != nil {
		return nil, err
	}
	return bundle.Entries[index%layout.EntryBundleWidth], nil
}

func (l *Log) ReadBundle(ctx context.Context, bundleIndex, size uint64) (*api.EntryBundle, error) {
	if l.wa != nil {
		if b, ok, err := l.bundleWithTail(ctx, bundleIndex, size); ok {
			return b, err
		}
	}
	p := layout.PartialTileSize(0, bundleIndex, size)
	raw, err := l.Reader.ReadEntryBundle(ctx, bundleIndex, p)
	if errors.Is(err, os.ErrNotExist) {
		raw, err = l.awaitBundle(ctx, bundleIndex, size, err)
	}
	if err != nil {
		return nil, fmt.Errorf("entry bundle %d: %w", bundleIndex, err)
	}
	var b api.EntryBundle
	if err := b.UnmarshalText(raw); err != nil {
		return nil, fmt.Errorf("entry bundle %d: %w", bundleIndex, err)
	}
	want := uint64(layout.EntryBundleWidth)
	if p != 0 {
		want = uint64(p)
	}
	if uint64(len(b.Entries)) < want {
		return nil, fmt.Errorf("entry bundle %d has %d entries, want %d", bundleIndex, len(b.Entries), want)
	}
	return &b, nil
}

// missingBundleWait bounds how long a read of an entry bundle that is not
// there yet waits for it: about two of Tessera's integration runs.
const missingBundleWait = 3 * time.Second

// awaitBundle reads entry bundle bundleIndex of a log of size, which was
// missing (missing: that error). On shared storage, entries a kernel has
// folded (sequenced, durable) reach the bucket about a second later, so the
// read first waits for the log to be integrated up to size; and the
// integrated size can be read a moment before the bundle at that size is
// (after a takeover or a restart, integration writes it again), so the
// read is tried again for missingBundleWait. A partial bundle exists only
// at the sizes the log was integrated at, and the collector removes it once
// the bundle is full: the current, wider one holds the same entries first,
// so it is read when the bundle at size is not there.
func (l *Log) awaitBundle(ctx context.Context, bundleIndex, size uint64, missing error) ([]byte, error) {
	if _, err := l.WaitIntegrated(ctx, size); err != nil {
		return nil, err
	}
	atSize := layout.PartialTileSize(0, bundleIndex, size)
	deadline := time.Now().Add(missingBundleWait)
	for {
		raw, err := l.Reader.ReadEntryBundle(ctx, bundleIndex, atSize)
		if !errors.Is(err, os.ErrNotExist) {
			return raw, err
		}
		missing = err
		if atSize > 0 {
			now, err := l.Reader.IntegratedSize(ctx)
			if err != nil {
				return nil, err
			}
			if wider := layout.PartialTileSize(0, bundleIndex, now); now > size && wider != atSize {
				raw, err := l.Reader.ReadEntryBundle(ctx, bundleIndex, wider)
				if !errors.Is(err, os.ErrNotExist) {
					return raw, err
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, missing
		}
		select {
		case <-ctx.Done():
			return nil, missing
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// InclusionProof returns the RFC 6962 inclusion proof of index in the tree
// of the given size, built from O(log n) tiles.
func (l *Log) InclusionProof(ctx context.Context, index, size uint64) ([][sha256.Size]byte, error) {
	return l.proofTiles().inclusion(ctx, index, size)
}

// ProofTilesKept says how far proofs are from their steady cost: of the
// full level-0 tiles of a log of size that proofs keep the tops of
// (at most maxLeafTops), how many are kept. The first proof starts keeping
// them all, in the background (residentProofs.warm); until then a proof of
// a leaf under a tile not yet kept hashes that tile whole.
func (l *Log) ProofTilesKept(size uint64) (kept, keepable uint64) {
	return uint64(l.proofTiles().store.topsKept.Load()), min(size/layout.TileWidth, maxLeafTops)
}

func (l *Log) proofTiles() *residentProofs {
	l.proofsOnce.Do(func() {
		l.proofs = newResidentProofs(l.ReadTile)
		if l.onDisk {
			l.proofs.readChunk = leafChunkReader(l.path)
		}
	})
	return l.proofs
}

// ConsistencyProof returns the RFC 6962 consistency proof between two sizes.
func (l *Log) ConsistencyProof(ctx context.Context, old, size uint64) ([][sha256.Size]byte, error) {
	if old > size {
		return nil, fmt.Errorf("consistency proof from %d to the smaller %d", old, size)
	}
	return l.proofTiles().consistency(ctx, old, size)
}

func ToHashes(in [][]byte) ([][sha256.Size]byte, error) {
	out := make([][sha256.Size]byte, len(in))
	for i, h := range in {
		if len(h) != sha256.Size {
			return nil, fmt.Errorf("proof hash %d is %d bytes", i, len(h))
		}
		out[i] = [sha256.Size]byte(h)
	}
	return out, nil
}

// CheckpointChangedAt is when the published checkpoint was last written:
// the file's time in the data folder; for a log in a bucket, when this
// kernel first saw the checkpoint it reads now.
func (l *Log) CheckpointChangedAt(ctx context.Context) (time.Time, error) {
	if l.onDisk {
		fi, err := os.Stat(filepath.Join(l.path, CheckpointFileName))
		if err != nil {
			return time.Time{}, err
		}
		return fi.ModTime(), nil
	}
	if _, err := l.LatestCheckpoint(ctx); err != nil {
		return time.Time{}, err
	}
	l.cp.mu.Lock()
	defer l.cp.mu.Unlock()
	return l.cp.changed, nil
}

// CheckOwnLog checks, before anything is appended, that the storage holds
// this log or none: a published checkpoint must be signed by this log's
// key, under its origin.
func (l *Log) CheckOwnLog(ctx context.Context, origin string) error {
	raw, err := l.Reader.ReadCheckpoint(ctx)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read the storage's checkpoint: %w", err)
	}
	if _, err := checkpoints.OpenCheckpoint(raw, l.Verifier); err != nil {
		return fmt.Errorf("the storage holds a checkpoint this log's key (origin %s) did not sign: it is another log's, so annald writes nothing to it: %w", origin, err)
	}
	return nil
}

// integrationWait bounds how long a read waits for sequenced entries to
// reach the tree.
const integrationWait = 30 * time.Second

// WaitIntegrated returns the integrated size once it reaches size, or
// once every entry sequenced is integrated if fewer than size are
// sequenced: on the POSIX driver at once (it integrates as it sequences);
// on the AWS driver within about a second.
func (l *Log) WaitIntegrated(ctx context.Context, size uint64) (uint64, error) {
	integrated, err := l.Reader.IntegratedSize(ctx)
	if err != nil || integrated >= size {
		return integrated, err
	}
	next, err := l.Reader.NextIndex(ctx)
	if err != nil {
		return 0, err
	}
	target := min(size, next)
	ctx, cancel := context.WithTimeout(ctx, integrationWait)
	defer cancel()
	for integrated < target {
		select {
		case <-ctx.Done():
			return integrated, fmt.Errorf("entries up to %d are sequenced but not yet in the tree (it has %d): %w", target, integrated, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if integrated, err = l.Reader.IntegratedSize(ctx); err != nil {
			return 0, err
		}
	}
	return integrated, nil
}

// SettledSize is the size of the log once everything sequenced so far is
// in the tree: what a kernel that starts folds.
func (l *Log) SettledSize(ctx context.Context) (uint64, error) {
	next, err := l.Reader.NextIndex(ctx)
	if err != nil {
		return 0, err
	}
	return l.WaitIntegrated(ctx, next)
}

// DiskLeafAt reads leaf hashes from the data folder's POSIX log.
func DiskLeafAt(logPath string) func(uint64) ([]byte, bool) {
	return func(i uint64) ([]byte, bool) {
		d := DiskLog{Root: logPath}
		size, _, err := d.TreeState()
		if err != nil || i >= size {
			return nil, false
		}
		index := i / layout.TileWidth
		nodes, _, err := d.Tile(0, index, int(min(size-index*layout.TileWidth, layout.TileWidth)))
		if err != nil {
			return nil, false
		}
		return nodes[i%layout.TileWidth], true
	}
}

// LeafAt reads leaf hashes through the log's reader (any storage).
func (l *Log) LeafAt(ctx context.Context) func(uint64) ([]byte, bool) {
	return func(i uint64) ([]byte, bool) {
		size, err := l.IntegratedSize(ctx)
		if err != nil || i >= size {
			return nil, false
		}
		index := i / layout.TileWidth
		raw, err := l.ReadTile(ctx, 0, index, layout.PartialTileSize(0, index, size))
		if err != nil {
			return nil, false
		}
		var t api.HashTile
		if t.UnmarshalText(raw) != nil || uint64(len(t.Nodes)) <= i%layout.TileWidth {
			return nil, false
		}
		return t.Nodes[i%layout.TileWidth], true
	}
}
