package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/annal-dev/annal/checkpoints"
)

// Entry returns the raw log entry at index: the canonical event bytes.
func (k *Kernel) Entry(ctx context.Context, index uint64) ([]byte, error) {
	entry, err := k.log.ReadEntry(ctx, index)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("entry %d: %w", index, ErrNotFound)
	}
	return entry, err
}

// LatestCheckpoint returns the latest published checkpoint, verified.
func (k *Kernel) LatestCheckpoint(ctx context.Context) (*checkpoints.SignedCheckpoint, error) {
	return k.log.LatestCheckpoint(ctx)
}

// InclusionProof returns the c2sp.org/tlog-proof for entry index against
// the latest checkpoint (or one a few milliseconds older that covers index:
// Log.ProofCheckpoint).
func (k *Kernel) InclusionProof(ctx context.Context, index uint64) (*checkpoints.TLogProof, error) {
	cp, err := k.log.ProofCheckpoint(ctx, index)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	return k.proofAt(ctx, index, cp)
}

// AwaitInclusionProof waits until a published checkpoint covers index and
// returns the tlog-proof against it.
// The wait ends early, with ErrWitnessRefused, once witnesses have refused
// the log's checkpoints for witnessPatience.
func (k *Kernel) AwaitInclusionProof(ctx context.Context, index uint64) (*checkpoints.TLogProof, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if k.witnesses != nil {
		go func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if err := k.witnessRefusal(index); err != nil {
						cancel(err)
						return
					}
				}
			}
		}()
	}
	cp, err := k.log.AwaitPublished(ctx, index)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrWitnessRefused) {
			return nil, cause
		}
		return nil, fmt.Errorf("await checkpoint covering %d: %w", index, err)
	}
	return k.proofAt(ctx, index, cp)
}

// witnessPatience is how long a witness must have been unreachable or
// failing before a wait for a proof gives up: long enough for a witness
// restart, short enough that no one waits in silence. A witness that
// refuses the log itself (404, 403) ends waits at once.
const witnessPatience = 2 * time.Second

// witnessRefusal is the error for an entry that waits on witnesses that
// have refused the log's checkpoints for witnessPatience, else nil.
func (k *Kernel) witnessRefusal(index uint64) error {
	problems := k.witnesses.Problems(witnessPatience)
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("entry %d is logged, but %w, so no checkpoint covering it can be published: %s", index, ErrWitnessRefused, strings.Join(problems, "; "))
}

func (k *Kernel) proofAt(ctx context.Context, index uint64, cp *checkpoints.SignedCheckpoint) (*checkpoints.TLogProof, error) {
	if index >= cp.Size {
		size, _ := k.log.Size(ctx)
		if index < size {
			if err := k.witnessRefusal(index); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("entry %d: %w: the latest checkpoint has size %d; retry after the next checkpoint", index, ErrNotPublished, cp.Size)
		}
		return nil, fmt.Errorf("entry %d: %w (log size %d)", index, ErrNotFound, size)
	}
	hashes, err := k.log.InclusionProof(ctx, index, cp.Size)
	if err != nil {
		return nil, fmt.Errorf("inclusion proof for %d in %d: %w", index, cp.Size, err)
	}
	return &checkpoints.TLogProof{Index: index, Hashes: hashes, Checkpoint: cp.Raw}, nil
}

// ConsistencyProof returns the RFC 6962 consistency proof from tree size
// old to tree size size; size MUST NOT exceed the latest checkpoint's.
func (k *Kernel) ConsistencyProof(ctx context.Context, old, size uint64) ([][32]byte, error) {
	cp, err := k.log.LatestCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	switch {
	case old > size:
		return nil, fmt.Errorf("%w: old size %d is larger than new size %d", ErrInvalid, old, size)
	case size > cp.Size:
		return nil, fmt.Errorf("%w: new size %d is larger than the latest checkpoint's %d", ErrInvalid, size, cp.Size)
	case old == 0 || old == size:
		return nil, nil // RFC 9162 §2.1.4: the empty proof
	}
	return k.log.ConsistencyProof(ctx, old, size)
}

// TileBytes returns a hash tile as stored (c2sp.org/tlog-tiles), width p
// (0: full), from whatever storage holds the log; os.ErrNotExist if it is
// not there.
func (k *Kernel) TileBytes(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
	return k.log.Reader.ReadTile(ctx, level, index, p)
}

// EntryBundleBytes returns an entry bundle as stored, width p (0: full).
func (k *Kernel) EntryBundleBytes(ctx context.Context, index uint64, p uint8) ([]byte, error) {
	return k.log.Reader.ReadEntryBundle(ctx, index, p)
}

// WitnessProblems lists why witnesses of the kernel's policy refuse its
// checkpoints now (nil when all cosign, or without witnesses).
func (k *Kernel) WitnessProblems() []string { return k.witnesses.Problems(0) }
