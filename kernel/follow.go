package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/sealstore"
)

// ErrNotWriter is why a follower decides nothing: another kernel holds the
// log's write lease, and every write goes to it.
var ErrNotWriter = errors.New("this kernel follows the log and takes no writes: the lease holder does")

// following is a follower's own state (nil in a kernel that writes).
type following struct {
	mu sync.Mutex
	// at is when the follower last read the log's size; err is why the
	// last attempt to follow failed (nil if it did not).
	at  time.Time
	err error
	// closeLog closes the read-only log.
	closeLog func() error
}

// followChunk is the most entries a follower folds in one hold of the
// kernel's lock: the entries of one entry bundle, read from the bucket
// while reads wait. Why not all at once: a follower far behind (a cold
// start) would hold every read of its state for the whole fold.
const followChunk = 256

// awaitPoll is how often a follower reads the bucket's checkpoint while a
// request waits for one that covers an entry (a proof with wait).
const awaitPoll = 200 * time.Millisecond

// OpenFollower opens a kernel that follows a log on shared storage
// (Storage.AWS) another kernel writes: its state, folded from the log into
// the data folder's state cache, answers every read (history, entries,
// proofs, tiles, checkpoints, actors, holds…) as a writing kernel's does,
// and every decision is refused with ErrNotWriter (an unavailable
// denial: retry, or send it to the lease holder). It reads the bucket and
// the database only: no Tessera appender, no lease. Follow keeps it up to
// the log. It holds the data folder until Close, after which the writing
// kernel may be opened on it.
func OpenFollower(ctx context.Context, cfg Config) (_ *Kernel, err error) {
	if cfg.Storage.OnDisk() {
		return nil, errors.New("follow: only a log on shared storage can be followed")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := logstore.OpenDataDir(cfg.DataDir, cfg.Origin)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			dir.Close()
		}
	}()
	verifier, err := checkpoints.NewLogVerifier(dir.VerifierKey)
	if err != nil {
		return nil, err
	}
	tl, err := logstore.OpenFollowing(ctx, cfg.Storage.AWS, verifier, awaitPoll, cfg.Now, cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tl.CloseFollowing()
		}
	}()
	if err := tl.CheckOwnLog(ctx, dir.Origin); err != nil {
		return nil, err
	}
	// The shared store (sealed payloads, blobs, console sessions) is the
	// writer's: a follower opens payloads, serves blobs and knows sessions
	// as it does. What a data folder holds from before is moved by the
	// writer, not here.
	shared, err := OpenShared(ctx, dir.Path, cfg.Storage.AWS)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			shared.Close()
		}
	}()
	cache, err := history.OpenCheckedState(dir, cfg.Logger, tl.LeafAt(ctx))
	if err != nil {
		return nil, err
	}
	k := newKernel(cfg, dir, tl, cache, sealstore.OpenShared(shared), shared)
	k.follower = &following{closeLog: tl.CloseFollowing}
	k.failed = ErrNotWriter
	k.resumable = true // "stopped taking work", with Retry-After: the holder takes it
	close(k.scrubbed)
	return k, nil
}

// Following reports whether k is a follower (OpenFollower).
func (k *Kernel) Following() bool { return k.follower != nil }

// FollowState is how far a follower has followed the log.
type FollowState struct {
	// Folded is how many entries its state has folded.
	Folded uint64
	// At is when it last read the log's size, Err why its last attempt
	// failed (nil if it did not).
	At  time.Time
	Err error
}

// Followed reports how far a follower has followed the log.
func (k *Kernel) Followed() FollowState {
	k.mu.RLock()
	size := k.ledger.Size
	k.mu.RUnlock()
	f := k.follower
	f.mu.Lock()
	defer f.mu.Unlock()
	return FollowState{Folded: size, At: f.at, Err: f.err}
}

// Follow folds what the log integrated into a follower's state every
// interval, and persists it, until ctx ends. A failed attempt is logged
// and tried again.
func (k *Kernel) Follow(ctx context.Context, interval time.Duration) error {
	if k.follower == nil {
		return errors.New("follow: the kernel writes the log itself")
	}
	for {
		err := k.followOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			k.logger.Warn("follower: could not follow the log; trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// followOnce folds the log up to its integrated size, a chunk per hold of
// the kernel's lock, and persists what it folded.
func (k *Kernel) followOnce(ctx context.Context) error {
	size, err := k.log.IntegratedSize(ctx)
	if err == nil {
		err = k.foldUpTo(ctx, size)
	}
	if err == nil {
		err = k.persist()
	}
	f := k.follower
	f.mu.Lock()
	f.err = err
	if err == nil {
		f.at = k.cfg.Now()
	}
	f.mu.Unlock()
	return err
}

func (k *Kernel) foldUpTo(ctx context.Context, size uint64) error {
	for {
		k.mu.Lock()
		before := k.ledger.Size
		if before >= size {
			k.mu.Unlock()
			return nil
		}
		err := history.FoldLog(ctx, k.log, k.ledger, min(size, before+followChunk), k.indexFolded)
		k.signalGrowth(before)
		k.mu.Unlock()
		if err != nil {
			return fmt.Errorf("fold the log from %d: %w", before, err)
		}
	}
}

// closeFollower closes a follower: its state persisted, the data folder
// released.
func (k *Kernel) closeFollower() error {
	k.closed = true
	err := errors.Join(k.persist(), k.follower.closeLog(), k.store.Close(), k.shared.Close())
	k.dir.Close()
	return err
}

// Follow keeps a standby's state warm: until ctx ends, it folds what the
// shared log (Storage.AWS) integrated into the data folder's state cache
// every interval (a follower that serves nothing). It holds the data
// folder while it runs; Open it after Follow returned.
func Follow(ctx context.Context, cfg Config, interval time.Duration) error {
	k, err := OpenFollower(ctx, cfg)
	if err != nil {
		return err
	}
	err = k.Follow(ctx, interval)
	return errors.Join(err, k.Close())
}
