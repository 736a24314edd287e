package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/history"
)

// The history: every folded event is indexed by the terms people search
// it by, in the state file beside the ledger (kernel/internal/history); a
// page reads O(page) index keys and entries, not O(log). The kernel
// decides who reads what (historyScope); the history package reads it.
//
// Visibility: the log itself is public (its tiles and /v1/events/<i> need
// no credential), so the history hides nothing that is secret; it answers
// within the caller's oversight so that a console shows each person their
// own agents. Root sees every event; any other actor sees the events whose
// actor is itself or an actor it created. A filter that names an actor, an
// envelope or a session outside the caller's oversight is refused
// (ErrForbidden), never answered with an empty page.
type (
	// HistoryQuery selects events. Empty fields select everything.
	HistoryQuery = history.Query
	// HistoryPage is a page of events and where the next one starts (nil
	// at the end).
	HistoryPage = history.Page
	// HistoryItem is one event of a page.
	HistoryItem = history.Item
	// ExportSelection chooses the events of an audit bundle.
	ExportSelection = history.ExportSelection
	// ExportResult says what Export wrote.
	ExportResult = history.ExportResult
	// RebuildReport says what Rebuild found.
	RebuildReport = history.RebuildReport
	// ToleratedEntry is an entry that breaks a rule and that the fold
	// passes over: the rule (gate) and why.
	ToleratedEntry = history.ToleratedEntry
	// RefusedEntryError is a log entry that breaks a rule with no
	// log.tolerated entry naming it: the log cannot be folded past it.
	RefusedEntryError = history.RefusedEntryError
)

// MaxHistoryPage bounds a page of the history.
const MaxHistoryPage = history.MaxPage

// Outcomes an action can have in the history.
const (
	OutcomeCommitted = history.OutcomeCommitted
	OutcomeDenied    = history.OutcomeDenied
	OutcomeHeld      = history.OutcomeHeld
)

// History answers a query within viewer's oversight.
func (k *Kernel) History(ctx context.Context, viewer *Actor, q HistoryQuery) (*HistoryPage, error) {
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Limit < 0 || q.Limit > MaxHistoryPage {
		return nil, fmt.Errorf("%w: limit must be 1 to %d", ErrInvalid, MaxHistoryPage)
	}
	visible, err := k.historyScope(viewer, q)
	if err != nil {
		return nil, err
	}
	return k.findPage(ctx, q, visible)
}

// findPage is one page of q among the events of the actors visible (nil:
// every actor's), as of the log the ledger has folded.
func (k *Kernel) findPage(ctx context.Context, q HistoryQuery, visible map[string]bool) (*HistoryPage, error) {
	k.mu.Lock()
	size := k.ledger.Size
	k.mu.Unlock()
	return history.Find(ctx, k.store, k.log, q, visible, size, func() []history.IndexedEvent {
		k.mu.Lock()
		defer k.mu.Unlock()
		return slices.Clone(k.unindexed)
	})
}

// CheckHistory says whether viewer may ask q of the history: nil, or the
// error History would answer q with before reading anything (a filter
// outside viewer's oversight, a malformed filter). A stream checks it
// before it starts, so that it refuses what a page refuses, at once.
func (k *Kernel) CheckHistory(viewer *Actor, q HistoryQuery) error {
	_, err := k.historyScope(viewer, q)
	return err
}

// historyScope is the one rule of who reads which history. It returns the
// actors whose events q may show viewer (nil: every actor's), or refuses
// a filter that names what viewer does not oversee:
//
//   - actor: viewer itself or an actor it created (root: any);
//   - envelope: one whose holder, or an issuer of whose chain, is viewer
//     or an actor it created — those who hold, delegated or oversee its
//     budget. They read every event under it, whoever its actor;
//   - session: one whose creator, or a participant of which (past or
//     present), is viewer or an actor it created. They read the events
//     in it of the actors they oversee.
//
// An envelope or session that does not exist is refused like one outside
// viewer's oversight (root gets an empty page), so that the answer does
// not tell them apart.
func (k *Kernel) historyScope(viewer *Actor, q HistoryQuery) (map[string]bool, error) {
	for _, v := range []string{q.Actor, q.Envelope, q.Session, q.Kind, q.Type, q.Outcome} {
		if strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("%w: a filter holds a NUL byte", ErrInvalid)
		}
	}
	if q.TraceID != "" && !event.ValidTraceID(q.TraceID) {
		return nil, fmt.Errorf("%w: trace_id %q is not a W3C trace id: 32 lower-case hex digits, not all zeros", ErrInvalid, q.TraceID)
	}
	if viewer.ID == RootID {
		return nil, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	visible := map[string]bool{viewer.ID: true}
	for id, a := range k.ledger.Actors {
		if a.Creator == viewer.ID {
			visible[id] = true
		}
	}
	if q.Actor != "" && !visible[q.Actor] {
		return nil, fmt.Errorf("%w: %s may not read the history of %s", ErrForbidden, viewer.ID, q.Actor)
	}
	if q.Session != "" && !k.overseesSession(visible, q.Session) {
		return nil, fmt.Errorf("%w: %s may not read the history of session %s: it oversees neither its creator nor a participant", ErrForbidden, viewer.ID, q.Session)
	}
	if q.Envelope != "" {
		if !k.overseesEnvelope(visible, q.Envelope) {
			return nil, fmt.Errorf("%w: %s may not read the history of envelope %s: it oversees neither its holder nor an issuer of its chain", ErrForbidden, viewer.ID, q.Envelope)
		}
		return nil, nil // every event under the envelope: matches checks each
	}
	return visible, nil
}

// overseesSession reports whether the actors visible include the session's
// creator or a participant of it, past or present (the caller holds k.mu).
func (k *Kernel) overseesSession(visible map[string]bool, id string) bool {
	se, ok := k.ledger.Sessions[id]
	if !ok {
		return false
	}
	oversees := visible[se.Creator]
	for p := range se.Participants {
		oversees = oversees || visible[p]
	}
	return oversees
}

// overseesEnvelope reports whether the actors visible include the
// envelope's holder or an issuer of its chain (the caller holds k.mu).
func (k *Kernel) overseesEnvelope(visible map[string]bool, id string) bool {
	chain, v := k.ledger.Chain(id)
	if v != nil || len(chain) == 0 {
		return false
	}
	oversees := visible[chain[0].Holder]
	for _, e := range chain {
		oversees = oversees || visible[e.Issuer]
	}
	return oversees
}
