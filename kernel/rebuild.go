package kernel

import (
	"bytes"
	"context"
	"fmt"

	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// Rebuild recomputes the kernel state from the log alone, compares it with
// the state file, and replaces the state file with the replay. The data
// folder must not be in use. A state file that cannot even be read counts
// as differing everywhere.
func Rebuild(ctx context.Context, cfg Config) (*RebuildReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return history.Rebuild(ctx, cfg.DataDir, cfg.logOptions())
}

// stateMatchesReplay compares the live ledger with a fresh replay of the
// log up to the ledger's size, and returns the keys that differ. It is the
// check of "state equals a fresh replay" that tests run after a crash.
func (k *Kernel) stateMatchesReplay(ctx context.Context) ([]string, error) {
	k.mu.Lock()
	size := k.ledger.Size
	live := k.ledger.Snapshot()
	k.mu.Unlock()
	fresh := ledger.New()
	if err := history.FoldLog(ctx, k.log, fresh, size); err != nil {
		return nil, err
	}
	if bytes.Equal(live, fresh.Snapshot()) {
		return nil, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ledger.Size != size {
		return nil, fmt.Errorf("the log grew during the comparison; compare on a quiet kernel")
	}
	return history.DiffLedgers(k.ledger, fresh), nil
}

// VerifyLog checks the stored log against its latest signed checkpoint:
// every entry up to the checkpoint's size is read from its entry bundle,
// parsed strictly, and hashed, and the tree of those leaf hashes must have
// the checkpoint's root. Any entry changed on disk after it was logged
// makes this fail (INV-1); the error names the first entry that does not
// parse, or the two roots.
func (k *Kernel) VerifyLog(ctx context.Context) (size uint64, err error) {
	return history.VerifyLog(ctx, k.log)
}
