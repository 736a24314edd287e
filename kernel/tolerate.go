package kernel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// A way back for a log that holds an entry its own rules refuse. Releases
// before the sequencer (commit.go) could write one when two requests
// raced past a missing claim; a kernel that met it stopped, and would not
// open the folder again. Tolerate has root accept such entries: it records
// them, the rule each breaks and the operator's reason in a log.tolerated
// entry, and from then on every fold of the log — the kernel's, annald
// rebuild's, annald audit's — passes over them, changing nothing, and
// checks everything else. Nothing is tolerated silently or by itself: an
// entry is passed over only when a log.tolerated entry later in the log
// names it with its leaf hash and rule.

// Tolerated lists the entries of the log that break a rule and that the
// fold passes over, each with the log.tolerated entry that accepts it.
func (k *Kernel) Tolerated() []ToleratedEntry {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return history.Tolerated(k.ledger)
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
