package kernel

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/ledger"
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
}

// Rebuild recomputes the kernel state from the log alone, compares it with
// the state file, and replaces the state file with the replay. The data
// folder must not be in use. A state file that cannot even be read counts
// as differing everywhere.
func Rebuild(ctx context.Context, cfg Config) (*RebuildReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, originFileName)); err != nil {
		return nil, fmt.Errorf("%s is not an annald data folder: %w", cfg.DataDir, err)
	}
	dir, err := OpenDataDir(cfg.DataDir, "")
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	signer, err := checkpoints.NewLogSigner(dir.SigningKey)
	if err != nil {
		return nil, err
	}
	verifier, err := checkpoints.NewLogVerifier(dir.VerifierKey)
	if err != nil {
		return nil, err
	}
	st, err := openStore(dir.StatePath(), dir.Origin)
	if err != nil {
		return nil, err
	}
	defer st.close()
	tl, err := openTileLog(dir.LogPath(), signer, verifier, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tl.close(shutdownCtx)
	}()
	size, err := tl.integratedSize(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	fresh := ledger.New()
	if err := foldLog(ctx, tl, fresh, size); err != nil {
		return nil, fmt.Errorf("replay the log: %w", err)
	}
	report := &RebuildReport{Size: size, Elapsed: time.Since(start)}
	stored, err := st.load()
	switch {
	case err != nil:
		report.Differences = []string{"state file unreadable: " + err.Error()}
	case stored.Size > size:
		report.StoredSize = stored.Size
		report.Differences = []string{fmt.Sprintf("state file folded %d entries, the log has %d", stored.Size, size)}
	default:
		report.StoredSize = stored.Size
		if err := foldLog(ctx, tl, stored, size); err != nil {
			report.Differences = []string{"state file cannot fold the log's tail: " + err.Error()}
		} else {
			report.Differences = diffLedgers(stored, fresh)
		}
	}
	values := map[string][]byte{}
	for _, key := range fresh.Keys() {
		v, _ := fresh.Encode(key)
		values[key] = v
	}
	if err := st.write(values, true); err != nil {
		return nil, fmt.Errorf("write the rebuilt state: %w", err)
	}
	return report, nil
}

// diffLedgers lists the keys where a and b differ.
func diffLedgers(a, b *ledger.Ledger) []string {
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

// StateMatchesReplay compares the live ledger with a fresh replay of the
// log up to the ledger's size, and returns the keys that differ. It is the
// check of "state equals a fresh replay" that tests run after a crash.
func (k *Kernel) StateMatchesReplay(ctx context.Context) ([]string, error) {
	k.mu.Lock()
	size := k.ledger.Size
	live := k.ledger.Snapshot()
	k.mu.Unlock()
	fresh := ledger.New()
	if err := foldLog(ctx, k.log, fresh, size); err != nil {
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
	return diffLedgers(k.ledger, fresh), nil
}
