package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/session"
)

// Session is a session as the ledger knows it.
type Session = ledger.Session

// CreateSession opens a session (§10) in state CREATED with a validated
// configuration; id "" picks one. Any active actor may: the creator then
// moves it through the state machine and admits participants.
func (k *Kernel) CreateSession(ctx context.Context, by *Actor, id string, cfg session.Config) (*Receipt, *Session, error) {
	const stage = "session"
	if id == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, nil, err
		}
		id = "session-" + hex.EncodeToString(b[:])
	}
	if err := ring.ValidIdentifier(id); err != nil {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "session id: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	d, err := k.decide(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindSessionCreated, Actor: by.ID, Session: id, SessionRecord: &event.SessionRecord{Config: cfg}}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	se, err := k.SessionByID(id)
	return receiptOf(d, "", ""), se, err
}

// SessionChange is one change to a session: a state, a participant
// joining or leaving, a cross-session read grant, a substitute, an intent
// lock taken or released, or an acknowledgement.
type SessionChange = event.SessionChange

// ChangeSession applies one change. The creator or root changes state,
// grants reads of sessions they also own, and names substitutes; an agent
// joins and leaves itself (or its creator's session admits it). A join
// records the agent's effective ring and trust score at that moment; the
// session's min_eff_score applies (§10.2). A participant of a
// SERIALIZABLE session takes and releases intent locks on its paths (the
// owner may release any); a participant of a STRONG session acknowledges
// its files at a chain head (Head; empty: the head when decided). See
// kernel/session/coordination.go.
func (k *Kernel) ChangeSession(ctx context.Context, by *Actor, id string, c SessionChange) (*Receipt, error) {
	const stage = "session"
	change := event.SessionChange{Op: c.Op, Reason: c.Reason}
	switch c.Op {
	case event.SessionOpState:
		change.State = c.State
	case event.SessionOpJoin, event.SessionOpLeave:
		change.Agent = c.Agent
		if change.Agent == "" {
			change.Agent = by.ID
		}
	case event.SessionOpGrant:
		change.Granted = c.Granted
	case event.SessionOpSubstitute:
		change.Agent = c.Agent
	case event.SessionOpLock, event.SessionOpUnlock:
		change.Path = c.Path
	case event.SessionOpAck:
		change.Head = c.Head
	default:
		return nil, formError(stage, "op %q is not state, join, leave, grant, substitute, lock, unlock or ack", c.Op)
	}
	return k.decideControl(ctx, stage, func(l *ledger.Ledger, now event.Instant) (*event.Event, error) {
		ch := change
		switch ch.Op {
		case event.SessionOpJoin:
			if a, ok := l.Actors[ch.Agent]; ok && !a.IsHuman() {
				eff, _ := l.EffectiveRing(a, id, now)
				ch.Ring, ch.EffScoreBP = int(eff), a.TrustBP
			}
		case event.SessionOpAck:
			if s, ok := l.Sessions[id]; ok && ch.Head == "" {
				ch.Head = s.DeltaHead
			}
		}
		return &event.Event{Kind: event.KindSessionChanged, Actor: by.ID, Session: id, SessionChange: &ch}, nil
	})
}

// DeltaRequest is one agent turn's file changes.
type DeltaRequest struct {
	TurnID  string         `json:"turn_id"`
	Changes []delta.Change `json:"changes"`
}

// AppendDelta records an agent turn's file changes in a session as one
// SemanticDelta (ADR-0023) chained to the session's previous delta, and
// commits it to the log: the chain is hash-linked and Merkle-anchored.
// The acting agent must be an active participant of an ACTIVE session,
// and every path must lie in the session's working directory rules. A
// change that does not fit the files the chain has (modify of a missing
// file, create of an existing one) is refused.
func (k *Kernel) AppendDelta(ctx context.Context, by *Actor, sessionID string, req DeltaRequest) (*Receipt, *delta.Delta, error) {
	const stage = "delta"
	id, err := newEventID()
	if err != nil {
		return nil, nil, err
	}
	d := delta.Delta{DeltaID: id, TurnID: req.TurnID, SessionID: sessionID, AgentDID: by.ID, Changes: slices.Clone(req.Changes),
		Timestamp: event.At(k.cfg.Now()).String(), ParentHash: delta.ZeroHash} // set again when decided
	if err := d.Seal(); err != nil { // the changes' form, before they are sealed
		return nil, nil, formError(stage, "%v", err)
	}
	done, err := k.sealDelta(&d)
	if err != nil {
		return nil, nil, err
	}
	// The files the changes must fit are read before the decision (from
	// the log, when the ledger no longer keeps them); a decision that
	// finds the chain moved on since reads them again.
	var rc *decided
	var fit *chainFiles
	var check bool
	for attempt := 1; ; attempt++ {
		if fit, check, err = k.filesToFit(ctx, sessionID); err != nil {
			break
		}
		rc, err = k.decide(ctx, stage, func(l *ledger.Ledger, now event.Instant) (*event.Event, error) {
			if err := checkFilesFit(l, sessionID, fit, check, d.Changes); err != nil {
				return nil, err
			}
			d.Timestamp, d.ParentHash = now.String(), zeroHashIfNone(l, sessionID)
			if d.Sealed != nil {
				d.Sealed.RetainUntil = k.retainUntil(now)
			}
			if err := d.Seal(); err != nil {
				return nil, formError(stage, "%v", err)
			}
			logged := d.Logged()
			return &event.Event{Kind: event.KindSessionDelta, Actor: by.ID, Session: sessionID, Delta: &logged}, nil
		})
		if !errors.Is(err, ErrRetryable) || attempt == maxDeltaAttempts {
			break
		}
	}
	done(err)
	if err != nil {
		return nil, nil, err
	}
	k.rememberFiles(sessionID, fit, check, &d)
	return receiptOf(rc, "", ""), &d, nil
}

// maxDeltaAttempts bounds the decisions of one delta whose session's chain
// keeps moving on under it.
const maxDeltaAttempts = 8

// chainFiles is what a session's files are after its chain's head.
type chainFiles struct {
	head  string
	files map[string]string // nil: unknown, a delta's changes were erased
}

// filesToFit is what a session's files are at its head, which the next
// delta's changes must fit: from the ledger while it keeps them (then the
// fold checks the changes), else (the session has sealed deltas,
// retention.go) from its chain, and then check says the kernel checks the
// changes itself when it decides. nil for a session that does not exist.
func (k *Kernel) filesToFit(ctx context.Context, sessionID string) (fit *chainFiles, check bool, _ error) {
	k.mu.Lock()
	se, ok := k.ledger.Sessions[sessionID]
	if ok && !se.FilesUnknown {
		fit = &chainFiles{head: se.DeltaHead, files: maps.Clone(se.Files)}
		if fit.files == nil {
			fit.files = map[string]string{}
		}
	}
	var head string
	if ok {
		head = se.DeltaHead
	}
	k.mu.Unlock()
	switch {
	case !ok:
		return nil, false, nil // the fold refuses the delta
	case fit != nil:
		return fit, false, nil
	}
	if c, ok := k.chainFiles.Load(sessionID); ok && c.(*chainFiles).head == head {
		return c.(*chainFiles), true, nil
	}
	files, head, known, err := k.filesOfChain(ctx, sessionID)
	if err != nil {
		return nil, false, err
	}
	if !known {
		files = nil
	}
	return &chainFiles{head: head, files: files}, true, nil
}

// zeroHashIfNone is the head of a session's chain, which the next delta
// names as its parent (32 zero bytes before the first).
func zeroHashIfNone(l *ledger.Ledger, sessionID string) string {
	if se, ok := l.Sessions[sessionID]; ok {
		return se.DeltaHead
	}
	return strings.Repeat("0", 64)
}

// SessionChain returns a session's deltas in order with their log indices,
// a sealed delta opened (its changes beside their commitment) while the
// kernel keeps its changes (retention.go).
func (k *Kernel) SessionChain(ctx context.Context, sessionID string) ([]delta.Delta, []uint64, error) {
	k.mu.Lock()
	se, ok := k.ledger.Sessions[sessionID]
	var indices []uint64
	if ok {
		indices = slices.Clone(se.DeltaIndices)
	}
	k.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("session %s: %w", sessionID, ErrNotFound)
	}
	out := make([]delta.Delta, 0, len(indices))
	for _, i := range indices {
		entry, err := k.log.ReadEntry(ctx, i)
		if err != nil {
			return nil, nil, err
		}
		ev, err := event.Parse(entry)
		if err != nil || ev.Delta == nil {
			return nil, nil, fmt.Errorf("entry %d is not a delta: %v", i, err)
		}
		out = append(out, k.openDelta(*ev.Delta))
	}
	return out, indices, nil
}

// RollbackPlan is what rolling a session back to a turn means: the files
// as they were after that turn, and the changes that take the head there.
type RollbackPlan struct {
	Session string            `json:"session"`
	Turn    string            `json:"turn"`
	Files   map[string]string `json:"files"`
	Undo    []delta.Change    `json:"undo"`
}

// Rollback reconstructs the state of a session's files after a turn and
// the changes that would restore it (ADR-0023: rollback to any turn).
func (k *Kernel) Rollback(ctx context.Context, sessionID, turn string) (*RollbackPlan, error) {
	deltas, _, err := k.SessionChain(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	files, err := delta.StateAt(deltas, turn)
	if errors.Is(err, delta.ErrErased) {
		return nil, denyAt("delta", "", ErrErased, "session %s cannot be rolled back: %v", sessionID, err)
	} else if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	undo, err := delta.Rollback(deltas, turn)
	if err != nil {
		return nil, err
	}
	return &RollbackPlan{Session: sessionID, Turn: turn, Files: files, Undo: undo}, nil
}

// Sessions lists the sessions the viewer created or takes part in (root:
// all).
func (k *Kernel) Sessions(viewer *Actor) []Session {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []Session{}
	for _, se := range k.ledger.Sessions {
		if viewer.ID == RootID || viewer.ID == se.Creator || se.IsActiveParticipant(viewer.ID) {
			out = append(out, *se)
		}
	}
	slices.SortFunc(out, func(a, b Session) int { return int(a.CreatedIndex) - int(b.CreatedIndex) })
	return out
}

// ViewSession returns a session to root, its creator and its
// participants (past or present).
func (k *Kernel) ViewSession(viewer *Actor, id string) (*Session, error) {
	se, err := k.SessionByID(id)
	if err != nil {
		return nil, err
	}
	if _, took := se.Participants[viewer.ID]; viewer.ID != RootID && viewer.ID != se.Creator && !took {
		return nil, denyAt("session", GateAuthority, ErrForbidden, "%s is neither the creator nor a participant of session %s", viewer.ID, id)
	}
	return se, nil
}

// ViewSessionFiles is ViewSession with the session's files filled in
// from its chain when the ledger does not keep them (its deltas' changes
// are sealed, retention.go): what the files are after the head, while
// every delta's changes are kept. Once one is erased the files stay
// unknown (FilesUnknown, Files empty).
func (k *Kernel) ViewSessionFiles(ctx context.Context, viewer *Actor, id string) (*Session, error) {
	se, err := k.ViewSession(viewer, id)
	if err != nil || !se.FilesUnknown {
		return se, err
	}
	fit, _, err := k.filesToFit(ctx, id) // the chain's files the next delta is checked against, kept between deltas
	if err != nil {
		return nil, err
	}
	if fit != nil && fit.files != nil && fit.head == se.DeltaHead { // a delta that came since is shown next time
		se.Files, se.FilesUnknown = maps.Clone(fit.files), false
	}
	return se, nil
}

// SessionByID returns one session.
func (k *Kernel) SessionByID(id string) (*Session, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	se, ok := k.ledger.Sessions[id]
	if !ok {
		return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	c := *se
	c.Session = *se.Session.Clone()
	c.Files = maps.Clone(se.Files)
	c.Turns = maps.Clone(se.Turns)
	c.DeltaIndices = slices.Clone(se.DeltaIndices)
	return &c, nil
}
