package logstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/annal-dev/annal/internal/atomicfile"
	"github.com/annal-dev/annal/kernel/internal/tilewriter"
	"github.com/annal-dev/annal/kernel/internal/wal"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
)

// WALDirName is the write-ahead log's folder in the data folder.
const WALDirName = "wal"

// walSegmentBytes is the size at which the write-ahead log starts a new
// segment; a segment goes once the tiles hold all of it. Small enough that
// the data folder carries little more than its log (at most about one
// segment and the tail), large enough that starting one (two extra syncs)
// is rare: about every 20,000 entries.
const walSegmentBytes = 8 << 20

// maxIntegrateBatch bounds the entries one write of the tile log takes: a
// backlog is worked off in steps, each of which frees its part of the
// write-ahead log.
const maxIntegrateBatch = 4096

// WriteAhead puts a write-ahead log in front of a data folder's tile log.
//
// A group of entries gets the next indices, goes to the write-ahead log in
// one write and one fsync, and is then durable: the kernel folds it and
// answers. The tile log (tilewriter, Tessera's POSIX layout) takes the
// entries behind, at exactly those indices, and Tessera's appender, which
// is never handed an entry, signs and publishes checkpoints of what is in
// the tiles. Until an entry is in the tiles the kernel serves it from the
// tail kept here, so a receipt's entry can be read at once.
//
// Why: a receipt then waits for one fsync instead of Tessera's batch (an
// entry bundle, tiles and the tree state, each synced with its folder), and
// the tile log is written in large batches behind, off the answer's path.
//
// After a crash, openWriteAhead writes what the write-ahead log holds past
// the tile log's durable size, and nothing below it: the tile writer is
// told the index of every entry, so an entry is never written twice, and a
// receipt's index is where its entry lands.
type WriteAhead struct {
	WAL     *wal.Log
	logDir  string
	logger  *slog.Logger
	maxTail int
	// onFailure is told when the tile log refuses the tail (the kernel then
	// stops taking writes, resumably or not) and again, with nil, once the
	// tail is in.
	onFailure func(err error, resumable bool)

	mu   sync.Mutex
	base uint64   // the index of tail[0]: every entry below is in the tiles
	tail [][]byte // durable in the write-ahead log, not yet in the tiles
	// failing is the tile log's last refusal, nil once it takes the tail.
	failing error
	// dead is set when the tiles cannot take the tail at all (they are not
	// what the write-ahead log continues, or they are damaged): nothing
	// more is written to them.
	dead     error
	started  bool
	stopping bool
	// pacing is set while the integrator waits out the time between two
	// writes of the tiles (pace): a write wakes it then only once the tail
	// fills a batch. Why: a lone client's every receipt woke it, and on
	// two cores the wake (a futex call and a second thread that runs only
	// to wait again) cost the receipt tens of microseconds, competing with
	// the answer's delivery for the other core.
	pacing bool
	// moved is closed (and replaced) whenever the tail shrinks, or failing
	// or dead changes: writers held back and close wait on it.
	moved chan struct{}
	wake  chan struct{} // the tail grew, or close began
	done  chan struct{} // the integrator has stopped

	tw *tilewriter.Writer // the integrator's; nil after a failed write

	// checkEdge, if set, is the start-up check of the tiles' newest files
	// (verifyLogEdge), run when a write of the tiles fails.
	checkEdge func() error
	// hold and fail are Config.holdTiles and Config.failTiles.
	hold <-chan struct{}
	fail func(landed bool) error
}

// openWriteAhead writes what the data folder's write-ahead log holds past
// its tile log into the tile log, and opens the write-ahead log for
// appends. It runs before Tessera opens the log folder. A folder with no
// write-ahead log gets one.
func openWriteAhead(dir *DataDir, maxTail int, logger *slog.Logger) (*WriteAhead, error) {
	logDir := dir.LogPath()
	tw, err := tilewriter.Open(logDir)
	if err != nil {
		return nil, fmt.Errorf("open the tile log for the write-ahead log: %w", err)
	}
	walDir := filepath.Join(dir.Path, WALDirName)
	marked, err := CheckWriteAheadOrigin(walDir, dir.Origin)
	if err != nil {
		return nil, err
	}
	w, records, info, err := wal.Open(walDir, tw.Size(), wal.Options{SegmentBytes: walSegmentBytes})
	if err != nil {
		return nil, WriteAheadError(err, tw.Size())
	}
	if !marked {
		if err := atomicfile.Write(filepath.Join(walDir, walOriginName), strings.NewReader(dir.Origin+"\n"), 0o600); err != nil {
			w.Close()
			return nil, fmt.Errorf("write-ahead log: %w", err)
		}
	}
	if info.TornBytes > 0 {
		logger.Warn("cut off the unacknowledged tail a crash left in the write-ahead log", "bytes", info.TornBytes,
			"file", info.TornFile, "offset", info.TornOffset, "reason", info.TornReason, "records_of_the_interrupted_write_after_it", info.TornRecordsAfter)
	}
	if info.UncommittedRecords > 0 {
		logger.Info("the write-ahead log's last write had no commit record (a crash right after its sync); its records read back and are kept",
			"from", info.UncommittedFirst, "records", info.UncommittedRecords)
	}
	if len(records) > 0 {
		start := time.Now()
		for i := 0; i < len(records); i += maxIntegrateBatch {
			chunk := records[i:min(i+maxIntegrateBatch, len(records))]
			entries := make([][]byte, len(chunk))
			for j, r := range chunk {
				entries[j] = r.Entry
			}
			if _, _, err := tw.Append(entries); err != nil {
				w.Close()
				return nil, fmt.Errorf("write the write-ahead log's entries from %d into the tile log: %w", chunk[0].Index, err)
			}
		}
		logger.Info("wrote the entries the write-ahead log held into the tile log", "entries", len(records),
			"from", records[0].Index, "size", tw.Size(), "elapsed", time.Since(start).Round(time.Millisecond))
	}
	if err := w.Release(tw.Size()); err != nil {
		w.Close()
		return nil, fmt.Errorf("write-ahead log: %w", err)
	}
	if w.Next() != tw.Size() {
		w.Close()
		return nil, fmt.Errorf("write-ahead log continues at %d but the tile log has %d entries", w.Next(), tw.Size())
	}
	return &WriteAhead{
		WAL: w, logDir: logDir, logger: logger, maxTail: max(maxTail, 1), tw: tw, base: tw.Size(),
		moved: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{}),
	}, nil
}

// remedyWriteAhead is the repair route for a damaged write-ahead segment.
// Why no other: an acknowledged entry is only in that segment until the
// tiles hold it, and a start that dropped the segment would give the next
// entries indices that receipts already name.
const remedyWriteAhead = "nothing in this data folder can recreate what the segment held. " +
	"First copy the whole data folder to a good disk: a disk that returned bad data once may read right on a second try, and if annald starts on the copy, use the copy. " +
	"Otherwise restore this segment from a backup, or from a copy of the disk made before the damage, and start again. " +
	"Never delete or truncate the segment to make annald start: the next entries would take indices that receipts already name"

// WriteAheadError names a write-ahead log that a start refuses: damage to
// a segment becomes a *DamageError that says which indices are at risk
// (against size, the tile log's) and the repair route.
func WriteAheadError(err error, size uint64) error {
	var damage *wal.DamageError
	if !errors.As(err, &damage) {
		return fmt.Errorf("write-ahead log: %w", err)
	}
	atRisk := damage.AtRisk()
	switch {
	case damage.EndKnown && damage.End > damage.First && damage.End <= size:
		atRisk += fmt.Sprintf(" (the tile log, of %d entries, holds them)", size)
	case damage.EndKnown && damage.End == damage.First+1:
		atRisk += "; a receipt may name it"
	case damage.End > damage.First || !damage.EndKnown:
		atRisk += "; receipts may name them"
	}
	return &DamageError{File: damage.File,
		Problem: fmt.Sprintf("the write-ahead log is damaged at offset %d: %s; %s", damage.Offset, damage.Problem, atRisk),
		Remedy:  remedyWriteAhead}
}

// ReplayWriteAhead writes what a data folder's write-ahead log holds into
// its tile log, if it has one: for tools that open the log folder when
// annald is not running.
func ReplayWriteAhead(dir *DataDir, logger *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(dir.Path, WALDirName)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	w, err := openWriteAhead(dir, 1, logger)
	if err != nil {
		return err
	}
	return w.WAL.Close()
}

// walOriginName is the file in the write-ahead log's folder that names the
// log it belongs to.
const walOriginName = "origin"

// CheckWriteAheadOrigin refuses, before anything in it is read, a
// write-ahead log folder that belongs to another log (copied from another
// data folder): its entries written into this log's tiles, at this log's
// indices and under its key, would be a history this log never decided.
// marked is false for a folder that names no log yet (a new one): the
// caller marks it as this log's.
func CheckWriteAheadOrigin(walDir, origin string) (marked bool, err error) {
	path := filepath.Join(walDir, walOriginName)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("write-ahead log: %w", err)
	}
	if got := strings.TrimSpace(string(raw)); got != origin {
		return false, &DamageError{File: path, Problem: fmt.Sprintf("the write-ahead log belongs to the log %q, not to this data folder's %q", got, origin),
			Remedy: "it was copied from another data folder: move the wal folder away (its entries are not this log's) and start again"}
	}
	return true, nil
}

// start starts the integrator.
func (w *WriteAhead) start() {
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
	go w.run()
}

// write is the group committer's write: the group gets the next indices
// and is durable once the write-ahead log has synced it. A tail that has
// grown to maxTail holds the group back until the tile log catches up.
func (w *WriteAhead) write(group []*CommitRequest) []CommitResult {
	results := make([]CommitResult, len(group))
	fail := func(err error) []CommitResult {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	for {
		w.mu.Lock()
		full, failing, dead, moved := len(w.tail) >= w.maxTail, w.failing, w.dead, w.moved
		w.mu.Unlock()
		if dead != nil {
			return fail(dead)
		}
		if !full {
			break
		}
		if failing != nil {
			return fail(fmt.Errorf("%w: %d entries wait for the tile log, which refuses them: %v", tessera.ErrPushback, w.maxTail, failing))
		}
		<-moved
	}
	entries := make([][]byte, len(group))
	for i, r := range group {
		entries[i] = r.entry
	}
	first := w.WAL.Next()
	if err := w.WAL.Append(first, entries); err != nil {
		return fail(fmt.Errorf("write-ahead log: %w", err))
	}
	w.mu.Lock()
	if w.base+uint64(len(w.tail)) != first {
		// The entries are durable but not where the tail says: what the
		// log holds is for the next start to decide, not this kernel.
		err := fmt.Errorf("%w: the write-ahead log wrote entries from %d but its tail ends at %d", wal.ErrBroken, first, w.base+uint64(len(w.tail)))
		w.mu.Unlock()
		return fail(err)
	}
	w.tail = append(w.tail, entries...)
	wake := w.wakesIntegrator()
	w.mu.Unlock()
	if wake {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	for i := range results {
		results[i].Index = first + uint64(i)
	}
	return results
}

// run writes the tail into the tile log until close, retrying a refusal
// with a growing pause.
func (w *WriteAhead) run() {
	defer close(w.done)
	pause := minRetryPause
	for {
		w.mu.Lock()
		stopping, dead := w.stopping, w.dead
		batch := w.tail[:min(len(w.tail), maxIntegrateBatch)]
		base := w.base
		w.mu.Unlock()
		switch {
		case stopping:
			return
		case len(batch) == 0 || dead != nil:
			<-w.wake
			continue
		case !w.released():
			continue
		}
		started := time.Now()
		permanent, err := w.judge(w.integrate(base, batch))
		switch {
		case permanent:
			w.logger.Error("the tile log cannot take the write-ahead log's entries; nothing more is written to it", "err", err)
			w.setFailure(err, true)
			w.onFailure(err, false)
		case err != nil:
			w.logger.Error("the tile log refuses entries of the write-ahead log; retrying", "from", base, "err", err)
			w.setFailure(err, false)
			w.onFailure(err, true)
			if !w.waitRetry(pause) {
				return
			}
			pause = min(2*pause, maxRetryPause)
		default:
			pause = minRetryPause
			w.pace(started)
		}
	}
}

// The pause before the integrator tries the tile log again doubles from
// minRetryPause with every refusal in a row, up to maxRetryPause.
const (
	minRetryPause = 50 * time.Millisecond
	maxRetryPause = 2 * time.Second
)

// released waits for the test hook Hold, if set, to let the integrator
// write; false if the tail grew or close began first (look again).
func (w *WriteAhead) released() bool {
	if w.hold == nil {
		return true
	}
	select {
	case <-w.hold:
		w.hold = nil
		return true
	case <-w.wake:
		return false
	}
}

// judge says whether err, the tile log's refusal of a batch, is permanent:
// the tiles are not what the tail continues, or their newest files are
// damaged (as the resume after a failed Tessera write does: damage is not
// retried onto, it is named).
func (w *WriteAhead) judge(err error) (permanent bool, _ error) {
	var inconsistent *inconsistentTailError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &inconsistent):
		return true, err
	case w.checkEdge != nil:
		if derr := w.checkEdge(); errors.Is(derr, ErrDamaged) {
			return true, fmt.Errorf("the log is damaged: %w", derr)
		}
	}
	return false, err
}

// waitRetry pauses before the integrator tries again. A wake (the tail
// grew, or close began) only makes it look whether close began; false if
// it did.
func (w *WriteAhead) waitRetry(pause time.Duration) bool {
	select {
	case <-time.After(pause):
	case <-w.wake:
		w.mu.Lock()
		stopping := w.stopping
		w.mu.Unlock()
		if stopping {
			return false
		}
		time.Sleep(pause)
	}
	return true
}

// tileWriteInterval is the least time from one write of the tiles to the
// next while the tail is short. Why: a write of the tiles syncs a dozen
// files and folders, and on one disk every sync waits for the same journal
// as the write-ahead log's: writing the tiles as often as they could be
// written doubled the receipt latency under load. Checkpoints come every
// 100 ms or more, so readers do not see the difference.
const tileWriteInterval = 50 * time.Millisecond

// busyTileWriteInterval is the time between writes of the tiles while the
// kernel is busy: when a tileWriteInterval has gathered busyTail entries or
// more. Why: every write rewrites the partial bundle and the partial tile
// of each level besides the tree state, and creating and syncing a file
// costs 120–250 µs of system time on ext4 here. Under load the partial
// files were most of what was written; writing them four times less often
// raised governed actions by a fifth or more on two cores
// (BenchmarkGovernedActions, interleaved). It matches the default
// checkpoint interval, so each checkpoint still finds a larger tree.
const (
	busyTileWriteInterval = 200 * time.Millisecond
	busyTail              = 256
)

// pace waits until tileWriteInterval has passed since started, or
// busyTileWriteInterval if the tail is busyTail long by then, unless the
// tail fills a batch, or close begins, first.
// Writes do not wake it meanwhile (pacing) unless the tail fills a batch;
// it reads the tail again when it returns.
func (w *WriteAhead) pace(started time.Time) {
	deadline := time.NewTimer(time.Until(started.Add(tileWriteInterval)))
	defer deadline.Stop()
	stretched := false
	w.setPacing(true)
	defer w.setPacing(false)
	tail := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stopping {
			return maxIntegrateBatch
		}
		return len(w.tail)
	}
	for tail() < maxIntegrateBatch {
		select {
		case <-deadline.C:
			if stretched || tail() < busyTail {
				return
			}
			stretched = true
			deadline.Reset(time.Until(started.Add(busyTileWriteInterval)))
		case <-w.wake:
		}
	}
}

// wakesIntegrator reports whether a write that grew the tail must wake
// the integrator: unless it paces and the tail does not fill a batch.
// The caller holds mu.
func (w *WriteAhead) wakesIntegrator() bool {
	return !w.pacing || len(w.tail) >= maxIntegrateBatch
}

func (w *WriteAhead) setPacing(on bool) {
	w.mu.Lock()
	w.pacing = on
	w.mu.Unlock()
}

// inconsistentTailError is a tile log that is neither at the tail's start
// nor inside the tail: what is durable is not what the kernel wrote.
type inconsistentTailError struct{ size, base, end uint64 }

func (e *inconsistentTailError) Error() string {
	return fmt.Sprintf("the tile log has %d entries, but the write-ahead log's tail runs from %d to %d", e.size, e.base, e.end)
}

// integrate writes batch, the tail from base, into the tile log. A tile
// log found past base (a failed write whose tree state did land) has the
// entries it holds dropped from the tail instead of written again.
func (w *WriteAhead) integrate(base uint64, batch [][]byte) error {
	if w.fail != nil {
		if err := w.fail(false); err != nil {
			return err
		}
	}
	if w.tw == nil {
		tw, err := tilewriter.Open(w.logDir)
		if err != nil {
			return err
		}
		w.tw = tw
	}
	switch size := w.tw.Size(); {
	case size == base:
	case size > base && size <= base+uint64(len(batch)):
		w.advance(int(size - base))
		return nil
	default:
		return &inconsistentTailError{size: size, base: base, end: base + uint64(len(batch))}
	}
	_, _, err := w.tw.Append(batch)
	if err == nil && w.fail != nil {
		err = w.fail(true) // as a folder sync that fails after the tree state landed
	}
	if err != nil {
		w.tw = nil
		return err
	}
	w.advance(len(batch))
	return nil
}

// advance drops the first n entries of the tail, which the tile log now
// holds, and frees their part of the write-ahead log.
func (w *WriteAhead) advance(n int) {
	w.mu.Lock()
	clear(w.tail[:n])
	w.tail = w.tail[n:]
	if len(w.tail) == 0 {
		w.tail = nil // let the backing array go
	}
	w.base += uint64(n)
	base, recovered := w.base, w.failing != nil
	w.failing = nil
	close(w.moved)
	w.moved = make(chan struct{})
	w.mu.Unlock()
	if recovered {
		w.onFailure(nil, true)
	}
	if err := w.WAL.Release(base); err != nil {
		w.logger.Warn("write-ahead log: could not remove what the tile log holds", "err", err)
	}
}

func (w *WriteAhead) setFailure(err error, dead bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failing = err
	if dead {
		w.dead = err
	}
	close(w.moved)
	w.moved = make(chan struct{})
}

// caughtUp reports whether the tile log holds every entry written.
func (w *WriteAhead) caughtUp() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.tail) == 0 && w.failing == nil
}

// next is the index the next entry gets: the log's size as the kernel
// serves it.
func (w *WriteAhead) next() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.base + uint64(len(w.tail))
}

// tailEntry returns entry index if the tail holds it. ok is false for an
// entry below the tail (read it from the tiles); err is set for one past
// the end.
func (w *WriteAhead) tailEntry(index uint64) (entry []byte, ok bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch end := w.base + uint64(len(w.tail)); {
	case index < w.base:
		return nil, false, nil
	case index >= end:
		return nil, true, fmt.Errorf("entry %d: %w (log size is %d)", index, os.ErrNotExist, end)
	default:
		return w.tail[index-w.base], true, nil
	}
}

// tailBundle returns entry bundle bundleIndex of a log of size, if part of
// it is in the tail: the tail's entries of it, and how many before them to
// read from the tiles (whose size then is at least base).
func (w *WriteAhead) tailBundle(bundleIndex, size uint64) (fromTiles, base uint64, entries [][]byte, ok bool, err error) {
	start := bundleIndex * layout.EntryBundleWidth
	end := min(size, start+layout.EntryBundleWidth)
	w.mu.Lock()
	defer w.mu.Unlock()
	if end <= w.base {
		return 0, 0, nil, false, nil
	}
	if tailEnd := w.base + uint64(len(w.tail)); end > tailEnd {
		return 0, 0, nil, true, fmt.Errorf("entry bundle %d: %w (log size is %d)", bundleIndex, os.ErrNotExist, tailEnd)
	}
	from := max(start, w.base)
	// A copy: advance clears the slots it drops.
	return from - start, w.base, append([][]byte(nil), w.tail[from-w.base:end-w.base]...), true, nil
}

// close writes the tail into the tile log, until ctx is done (what is left
// stays in the write-ahead log for the next start), and closes the
// write-ahead log.
func (w *WriteAhead) close(ctx context.Context) error {
	var err error
	for {
		w.mu.Lock()
		empty, dead, moved, started := len(w.tail) == 0, w.dead, w.moved, w.started
		left := len(w.tail)
		w.mu.Unlock()
		if empty || dead != nil || !started {
			break
		}
		select {
		case <-moved:
			continue
		case <-ctx.Done():
			err = fmt.Errorf("%d entries are left in the write-ahead log for the next start: %w", left, ctx.Err())
		}
		break
	}
	w.mu.Lock()
	w.stopping = true
	started := w.started
	w.mu.Unlock()
	if started {
		select {
		case w.wake <- struct{}{}:
		default:
		}
		<-w.done
	}
	return errors.Join(err, w.WAL.Close())
}

// bundleWithTail is entry bundle bundleIndex of a log of size, part of it
// from the tiles and the rest from the write-ahead log's tail.
func (l *Log) bundleWithTail(ctx context.Context, bundleIndex, size uint64) (*api.EntryBundle, bool, error) {
	fromTiles, base, tail, ok, err := l.wa.tailBundle(bundleIndex, size)
	if !ok || err != nil {
		return nil, ok, err
	}
	b := &api.EntryBundle{Entries: make([][]byte, 0, fromTiles+uint64(len(tail)))}
	if fromTiles > 0 {
		head, err := l.ReadBundle(ctx, bundleIndex, base)
		if err != nil {
			return nil, true, err
		}
		b.Entries = append(b.Entries, head.Entries[:fromTiles]...)
	}
	b.Entries = append(b.Entries, tail...)
	return b, true, nil
}
