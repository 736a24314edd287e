package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	k.mu.Lock()
	size := k.ledger.Size
	k.mu.Unlock()
	return Find(ctx, k.store, k.log, q, visible, size, func() []IndexedEvent {
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
	if q.Session != "" {
		se, ok := k.ledger.Sessions[q.Session]
		oversees := ok && visible[se.Creator]
		if ok {
			for id := range se.Participants {
				oversees = oversees || visible[id]
			}
		}
		if !oversees {
			return nil, fmt.Errorf("%w: %s may not read the history of session %s: it oversees neither its creator nor a participant", ErrForbidden, viewer.ID, q.Session)
		}
	}
	if q.Envelope != "" {
		chain, v := k.ledger.Chain(q.Envelope)
		oversees := v == nil && len(chain) > 0 && visible[chain[0].Holder]
		for _, e := range chain {
			oversees = oversees || (v == nil && visible[e.Issuer])
		}
		if !oversees {
			return nil, fmt.Errorf("%w: %s may not read the history of envelope %s: it oversees neither its holder nor an issuer of its chain", ErrForbidden, viewer.ID, q.Envelope)
		}
		return nil, nil // every event under the envelope: matches checks each
	}
	return visible, nil
}
