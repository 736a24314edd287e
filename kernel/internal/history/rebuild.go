package history

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api/layout"
)

// RebuildReport says what Rebuild found.
type RebuildReport struct {
	// Size is the number of log entries replayed.
	Size uint64
	// StoredSize is how far the state file had folded the log.
	StoredSize uint64
	// Differences lists the state keys ("actor/<id>", ...) where the state
	// file, brought up to the log's size, differed from the replay.
	Differences []string
	// Elapsed is how long the replay took.
	Elapsed time.Duration
	// SignaturesAhead counts the signed entries whose signature was
	// verified on all cores ahead of the fold (the fold verifies any
	// other itself).
	SignaturesAhead uint64
}

// Rebuild is Rebuild on the data folder at dataDir.
func Rebuild(ctx context.Context, dataDir string, opts logstore.LogOptions) (*RebuildReport, error) {
	dir, err := logstore.OpenExistingDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	signer, verifier, err := dir.LogKeys()
	if err != nil {
		return nil, err
	}
	// Tessera would start an empty tree on a log folder that lost its tree
	// state: nothing is replayed from a log that fails its check.
	if _, err := logstore.CheckLog(ctx, dir.LogPath(), verifier); err != nil {
		return nil, fmt.Errorf("start-up check of the log: %w", err)
	}
	cache, err := OpenStateCache(dir.StatePath(), dir.Origin)
	if err != nil {
		return nil, err
	}
	closeCache := sync.OnceValue(cache.Store.Close)
	defer closeCache()
	if err := logstore.ReplayWriteAhead(dir, opts.Logger); err != nil {
		return nil, err
	}
	tl, err := logstore.OpenLog(dir.LogPath(), signer, verifier, opts, nil, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tl.Close(shutdownCtx)
	}()
	size, err := tl.IntegratedSize(ctx)
	if err != nil {
		return nil, err
	}
	out, err := createRebuiltState(dir.StatePath()+".rebuild", dir.Origin)
	if err != nil {
		return nil, fmt.Errorf("create the rebuilt state: %w", err)
	}
	report, err := replayInto(ctx, tl, size, cache, out, dir.StatePath(), closeCache)
	if err != nil {
		out.discard()
		return nil, err
	}
	return report, nil
}

// replayInto folds the log tl's size entries into a fresh ledger and the
// history index of out, compares the ledger with the state file's (cache,
// at statePath), and puts out in the state file's place once closeCache
// has closed it.
func replayInto(ctx context.Context, tl *logstore.Log, size uint64, cache *StateCache, out *rebuiltState, statePath string, closeCache func() error) (*RebuildReport, error) {
	start := time.Now()
	fresh := ledger.New()
	ahead, err := foldLog(ctx, tl, fresh, size, nil, parseWork{terms: true, origin: out.origin}, func(p *parsedRun, j int) {
		out.add(p.from+uint64(j), p.terms[j])
	})
	if err != nil {
		return nil, fmt.Errorf("replay the log: %w", err)
	}
	report := &RebuildReport{Size: size, Elapsed: time.Since(start), SignaturesAhead: ahead}
	if err := out.finishIndex(); err != nil {
		return nil, fmt.Errorf("write the rebuilt history index: %w", err)
	}
	report.compare(ctx, tl, cache, fresh, statePath)
	folded, err := FoldedAt(ctx, tl, size)
	if err != nil {
		return nil, err
	}
	if err := closeCache(); err != nil {
		return nil, err
	}
	if err := out.commit(encodedValues(fresh), folded, statePath); err != nil {
		return nil, fmt.Errorf("write the rebuilt state: %w", err)
	}
	return report, nil
}

// compare brings the state file's ledger (in cache, at statePath) up to
// the log's size and lists where it differs from the replay, fresh.
func (report *RebuildReport) compare(ctx context.Context, tl *logstore.Log, cache *StateCache, fresh *ledger.Ledger, statePath string) {
	stored, size := cache.Ledger, report.Size
	switch {
	case cache.Damaged != nil:
		report.Differences = []string{"state file damaged, set aside as " + filepath.Base(statePath) + ".damaged: " + cache.Damaged.Error()}
	case stored.Size > size:
		report.StoredSize = stored.Size
		report.Differences = []string{fmt.Sprintf("state file folded %d entries, the log has %d", stored.Size, size)}
	default:
		report.StoredSize = stored.Size
		if err := FoldLog(ctx, tl, stored, size); err != nil {
			report.Differences = []string{"state file cannot fold the log's tail: " + err.Error()}
		} else {
			report.Differences = DiffLedgers(stored, fresh)
		}
	}
}

// encodedValues are the stored values of every key of l.
func encodedValues(l *ledger.Ledger) map[string][]byte {
	values := map[string][]byte{}
	for _, key := range l.Keys() {
		v, _ := l.Encode(key)
		values[key] = v
	}
	return values
}

// DiffLedgers lists the keys where a and b differ.
func DiffLedgers(a, b *ledger.Ledger) []string {
	keys := append(a.Keys(), b.Keys()...)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var diff []string
	for _, k := range keys {
		va, oka := a.Encode(k)
		vb, okb := b.Encode(k)
		if oka != okb || !bytes.Equal(va, vb) {
			diff = append(diff, k)
		}
	}
	return diff
}

// VerifyLog is Kernel.VerifyLog on the log tl.
func VerifyLog(ctx context.Context, tl *logstore.Log) (size uint64, err error) {
	cp, err := tl.LatestCheckpoint(ctx)
	if err != nil {
		return 0, fmt.Errorf("latest checkpoint: %w", err)
	}
	rng := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	for start := uint64(0); start < cp.Size; start += layout.EntryBundleWidth {
		b, err := tl.ReadBundle(ctx, start/layout.EntryBundleWidth, cp.Size)
		if err != nil {
			return 0, fmt.Errorf("entry bundle at %d: %w", start, err)
		}
		end := min(cp.Size, start+layout.EntryBundleWidth)
		if uint64(len(b.Entries)) < end-start {
			return 0, fmt.Errorf("entry bundle at %d holds %d entries, want %d", start, len(b.Entries), end-start)
		}
		for i := start; i < end; i++ {
			entry := b.Entries[i-start]
			if _, err := event.Parse(entry); err != nil {
				return 0, fmt.Errorf("entry %d: %w", i, err)
			}
			if err := rng.Append(rfc6962.DefaultHasher.HashLeaf(entry), nil); err != nil {
				return 0, err
			}
		}
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(root, cp.Hash[:]) {
		return 0, fmt.Errorf("the %d stored entries hash to root %x, the signed checkpoint says %x: the log was changed after it was signed", cp.Size, root, cp.Hash)
	}
	return cp.Size, nil
}
