package kernel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/transparency-dev/tessera/api/layout"
)

// A way back for a log that holds an entry its own rules refuse. Releases
// before the sequencer (sequencer.go) could write one when two requests
// raced past a missing claim; a kernel that met it stopped, and would not
// open the folder again. Tolerate has root accept such entries: it records
// them, the rule each breaks and the operator's reason in a log.tolerated
// entry, and from then on every fold of the log — the kernel's, annald
// rebuild's, annald audit's — passes over them, changing nothing, and
// checks everything else. Nothing is tolerated silently or by itself: an
// entry is passed over only when a log.tolerated entry later in the log
// names it with its leaf hash and rule.

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

// toleratedOf returns the ledger's tolerated entries, by index.
func toleratedOf(l *ledger.Ledger) []ToleratedEntry {
	var out []ToleratedEntry
	for _, t := range l.Tolerated {
		out = append(out, ToleratedEntry{Index: t.Index, Kind: string(t.Kind), Actor: t.Actor, LeafHash: t.LeafHash,
			Gate: t.Gate, Reason: t.Reason, Record: t.Record, Why: t.Why})
	}
	slices.SortFunc(out, func(a, b ToleratedEntry) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// Tolerated lists the entries of the log that break a rule and that the
// fold passes over, each with the log.tolerated entry that accepts it.
func (k *Kernel) Tolerated() []ToleratedEntry {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return toleratedOf(k.ledger)
}

// tolerateRequest is annald tolerate's: the entries to accept, why, and
// the credential it acts with, which must be root's.
type tolerateRequest struct {
	entries    map[uint64]bool
	reason     string
	credential string
	// record is the log.tolerated entry's index, once appended.
	record uint64
}

// ToleranceReport is what Tolerate recorded.
type ToleranceReport struct {
	// Record is the index of the log.tolerated entry.
	Record uint64 `json:"record"`
	// Entries are the entries it accepts.
	Entries []ToleratedEntry `json:"entries"`
}

// Tolerate has root accept entries of the data folder's log that break a
// rule: it folds the log, passing over exactly those entries (each must
// break a rule, and every other entry must fold or be accepted already),
// and appends a log.tolerated entry, under root and acting with
// credential, which must be root's, naming each one, its leaf hash, the
// rule it breaks, and reason. Nothing is written unless all of that holds.
// The data folder must not be in use.
func Tolerate(ctx context.Context, cfg Config, credential string, entries []uint64, reason string) (*ToleranceReport, error) {
	switch {
	case len(entries) == 0 || len(entries) > event.MaxToleratedEntries:
		return nil, fmt.Errorf("name 1 to %d entries to tolerate, not %d", event.MaxToleratedEntries, len(entries))
	case strings.TrimSpace(reason) == "" || len(reason) > 1024 || !utf8.ValidString(reason):
		return nil, errors.New("give the operator's reason: 1 to 1024 bytes of UTF-8, recorded in the log")
	case credential == "":
		return nil, errors.New("tolerating entries takes the root credential")
	}
	req := &tolerateRequest{entries: map[uint64]bool{}, reason: reason, credential: credential}
	for _, i := range entries {
		req.entries[i] = true
	}
	cfg.tolerate = req
	k, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	report := &ToleranceReport{Record: req.record}
	for _, t := range k.Tolerated() {
		if t.Record == req.record {
			report.Entries = append(report.Entries, t)
		}
	}
	if err := k.Close(); err != nil {
		return report, err
	}
	return report, nil
}

// recordToleration appends annald tolerate's log.tolerated entry, once the
// log is folded with the entries it names passed over (recover).
func (k *Kernel) recordToleration(ctx context.Context, req *tolerateRequest) error {
	root, ok := k.ledger.Actors[RootID]
	if !ok || root.CredentialSHA256 != event.CredentialHash(req.credential) {
		return fmt.Errorf("%w: the credential is not root's: only root tolerates entries", ErrUnauthenticated)
	}
	var named []event.ToleratedEntry
	for i := range req.entries {
		t, ok := k.ledger.ToleratedAt(i)
		switch {
		case i >= k.ledger.Size:
			return fmt.Errorf("entry %d is not in the log, which has %d entries", i, k.ledger.Size)
		case !ok:
			return fmt.Errorf("entry %d breaks no rule: it is folded, not tolerated", i)
		case t.Record != 0:
			return fmt.Errorf("entry %d was tolerated at entry %d already", i, t.Record)
		}
		named = append(named, event.ToleratedEntry{Index: i, LeafHash: t.LeafHash, Gate: t.Gate, Reason: truncateUTF8(t.Reason, 1024)})
	}
	slices.SortFunc(named, func(a, b event.ToleratedEntry) int { return cmp.Compare(a.Index, b.Index) })
	d, err := k.decide(ctx, "tolerate", func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindTolerated, Actor: RootID, Toleration: &event.Toleration{Entries: named, Reason: req.reason}}, nil
	})
	if err != nil {
		return fmt.Errorf("record the toleration: %w", err)
	}
	req.record = d.index
	k.logger.Warn("root tolerated entries that break a rule; every fold passes over them", "entries", len(named), "record", d.index, "reason", req.reason)
	return nil
}

// truncateUTF8 cuts s to at most n bytes, at a rune's start.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
