package history

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/transparency-dev/tessera/api/layout"
)

// RefusedEntryError is a log entry that breaks a rule with no
// log.tolerated entry naming it: the log cannot be folded past it.
type RefusedEntryError struct {
	*ledger.FoldError
}

func (e *RefusedEntryError) Error() string {
	return fmt.Sprintf("%v. The log holds an entry its own rules refuse (a release before the sequencer could write one). "+
		"Look at it (annald audit); to serve the log, accept it with `annald tolerate --entry %d --reason \"...\"`, "+
		"which records it in the log under the root credential: every fold then passes over it, and it stays in the log as evidence",
		e.FoldError, e.Index)
}

// Unwrap returns the fold error.
func (e *RefusedEntryError) Unwrap() error { return e.FoldError }

// passOver handles an entry the fold of the log refused (err): unless err
// is a rule broken, or the entry is not tolerated — named by a later
// log.tolerated below size (read reads the log a bundle at a time), or in
// accept, which annald tolerate is about to record — it returns the error
// to stop the fold with. Otherwise the ledger passes over the entry.
func passOver(ctx context.Context, l *ledger.Ledger, index uint64, ev *event.Event, entry []byte, err error,
	read func(bundleIndex uint64) ([][]byte, error), size uint64, accept map[uint64]bool) error {
	var fe *ledger.FoldError
	if !errors.As(err, &fe) || index == 0 {
		return err
	}
	leaf := event.LeafHash(entry)
	leafHex := hex.EncodeToString(leaf[:])
	if !accept[index] {
		found, ferr := findToleration(ctx, read, index, size, leafHex, fe.Gate)
		if ferr != nil {
			return fmt.Errorf("%w (looking for a log.tolerated entry that names it: %v)", err, ferr)
		}
		if !found {
			return &RefusedEntryError{fe}
		}
	}
	if _, terr := l.Tolerate(index, ev, leafHex); terr != nil {
		return fmt.Errorf("%w (and it cannot be passed over: %v)", err, terr)
	}
	return nil
}

// toleratedKind is how a log.tolerated entry starts to tell itself apart
// in its canonical bytes, read before an entry is parsed.
var toleratedKind = []byte(`"kind":"` + string(event.KindTolerated) + `"`)

// findToleration looks through the log's entries after index, below size,
// for a log.tolerated entry that names entry index with leafHash and gate.
func findToleration(ctx context.Context, read func(bundleIndex uint64) ([][]byte, error), index, size uint64, leafHash, gate string) (bool, error) {
	for from := index + 1; from < size; {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		bundleIndex := from / layout.EntryBundleWidth
		end := min(size, (bundleIndex+1)*layout.EntryBundleWidth)
		entries, err := read(bundleIndex)
		if err != nil {
			return false, err
		}
		for i := from; i < end; i++ {
			j := i - bundleIndex*layout.EntryBundleWidth
			if j >= uint64(len(entries)) {
				return false, fmt.Errorf("entry bundle %d holds %d entries, the log needs %d", bundleIndex, len(entries), end-bundleIndex*layout.EntryBundleWidth)
			}
			if !bytes.Contains(entries[j], toleratedKind) {
				continue
			}
			ev, err := event.Parse(entries[j])
			if err != nil || ev.Kind != event.KindTolerated {
				continue // the fold names what is wrong with it when it gets there
			}
			for _, t := range ev.Toleration.Entries {
				if t.Index == index && t.LeafHash == leafHash && t.Gate == gate {
					return true, nil
				}
			}
		}
		from = end
	}
	return false, nil
}

// ToleratedEntry is an entry that breaks a rule and that the fold passes
// over: the rule (gate) and why.
type ToleratedEntry struct {
	Index    uint64 `json:"index"`
	Kind     string `json:"kind"`
	Actor    string `json:"actor"`
	LeafHash string `json:"leaf_hash"`
	Gate     string `json:"gate"`
	Reason   string `json:"reason"`
	// Record is the index of the log.tolerated entry that accepts it, and
	// Why the operator's reason given there.
	Record uint64 `json:"record"`
	Why    string `json:"why"`
}

// Tolerated returns the ledger's tolerated entries, by index.
func Tolerated(l *ledger.Ledger) []ToleratedEntry {
	var out []ToleratedEntry
	for _, t := range l.Tolerated {
		out = append(out, ToleratedEntry{Index: t.Index, Kind: string(t.Kind), Actor: t.Actor, LeafHash: t.LeafHash,
			Gate: t.Gate, Reason: t.Reason, Record: t.Record, Why: t.Why})
	}
	slices.SortFunc(out, func(a, b ToleratedEntry) int { return cmp.Compare(a.Index, b.Index) })
	return out
}
