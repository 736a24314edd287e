package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// stopWriting stops every writer (the caller holds k.mu). A resumable
// stop wakes the resume loop; a stop that is not replaces one that is.
func (k *Kernel) stopWriting(why error, resumable bool) {
	if k.failed != nil && (!k.resumable || resumable) {
		return
	}
	k.failed, k.resumable = why, resumable
	if resumable {
		k.logger.Error("the kernel stops taking writes until the log takes them again", "err", why)
		select {
		case k.wakeResume <- struct{}{}:
		default:
		}
		return
	}
	k.logger.Error("the kernel stops taking writes until an operator looks", "err", why)
}

// tileLogFailure hears from the write-ahead log when the tile log refuses
// the entries it holds (err set), and once it takes them again (err nil).
// The entries are durable and answered; until the tiles hold them the
// kernel decides nothing more, so that a refusal that lasts cannot grow
// the write-ahead log without bound.
func (k *Kernel) tileLogFailure(err error, resumable bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.stopWriting(fmt.Errorf("the tile log refuses the entries the write-ahead log holds: %w", err), resumable)
		return
	}
	if k.failed != nil && k.resumable {
		select {
		case k.wakeResume <- struct{}{}:
		default:
		}
	}
}

// Ready is nil while the kernel takes writes, else why it does not.
func (k *Kernel) Ready() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.failed
}

// resumeLoop brings the kernel back after a failed append, as soon as the
// storage takes writes again.
func (k *Kernel) resumeLoop(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-k.wakeResume:
		}
		for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
			done, err := k.tryResume(context.Background())
			if done {
				break
			}
			k.logger.Debug("the log does not take writes yet", "err", err)
		}
	}
}

// resumeProbeBytes is how much the resume probe writes: room for a group
// of entries, their tiles and the tree state.
const resumeProbeBytes = 1 << 20

// tryResume resumes writing if the data folder takes a write and fsync
// again: once no entry is in flight, it re-reads the log's tree, checks its
// newest tiles and bundles as the start-up check does, and folds what
// landed although reported failed, so that nothing is written twice. done
// is false when it should be tried again later.
func (k *Kernel) tryResume(ctx context.Context) (done bool, err error) {
	k.mu.Lock()
	resumable := k.failed != nil && k.resumable
	k.mu.Unlock()
	if !resumable {
		return true, nil
	}
	probe := func() error { return logstore.ProbeWritable(k.dir.Path, resumeProbeBytes) }
	if k.cfg.probeWrite != nil {
		probe = k.cfg.probeWrite
	}
	if err := probe(); err != nil {
		return false, err
	}
	if err := k.log.Quiet(); err != nil {
		return false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failed == nil || !k.resumable {
		return true, nil
	}
	size, err := k.log.Edge(ctx)
	if err != nil && !k.cfg.Storage.OnDisk() {
		return false, err // the database or the bucket is away: try again
	}
	if err != nil {
		k.failed, k.resumable = fmt.Errorf("after a failed append: %w", err), false
		k.logger.Error("the log is damaged after a failed append; the kernel stops taking writes until an operator looks", "err", err)
		return true, err
	}
	before := k.ledger.Size
	defer k.signalGrowth(before)
	if err := history.FoldLog(ctx, k.log, k.ledger, size, k.indexFolded); err != nil {
		k.failed, k.resumable = fmt.Errorf("after a failed append, fold what landed: %w", err), false
		k.logger.Error("what landed during a failed append cannot be folded; the kernel stops taking writes until an operator looks", "err", err)
		return true, err
	}
	k.logger.Info("the log takes writes again; the kernel resumes", "size", size, "after", k.failed)
	k.resetSequencer()
	k.failed, k.resumable = nil, false
	if k.cfg.Storage.OnDisk() {
		go func() {
			if n, err := logstore.RemoveTempFilesOlder(k.dir.LogPath(), time.Minute); err != nil || n > 0 {
				k.logger.Info("removed temporary files that failed writes left", "count", n, "err", err)
			}
		}()
	}
	return true, nil
}

// backgroundScrubShare is the part of one core the scrub after start
// takes: a log of 10M entries is read in about two minutes, and what it
// takes from requests is small.
const backgroundScrubShare = 0.125

// scrub checks the whole log below size, in the background after start
// and paced to backgroundScrubShare: an entry or tile damaged on disk
// stops every writer (the start-up check reads only the log's newest
// files).
func (k *Kernel) scrub(size uint64, root []byte) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-k.stopLoops:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	err := logstore.ScrubLogPaced(ctx, k.dir.LogPath(), size, root, backgroundScrubShare)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		k.mu.Lock()
		k.stopWriting(fmt.Errorf("the log is damaged: %w", err), false)
		k.mu.Unlock()
	default:
		k.logger.Info("log scrubbed: every entry and tile agrees with the signed tree", "size", size, "elapsed", time.Since(start).Round(time.Millisecond))
	}
}
