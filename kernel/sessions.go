package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

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
	rc, err := k.control(ctx, stage, []string{"session/" + id}, func(now time.Time) (*event.Event, error) {
		a, err := k.liveActor(stage, by.ID)
		if err != nil {
			return nil, err
		}
		if !a.IsHuman() {
			if err := k.agentMayAct(stage, a, "", now); err != nil {
				return nil, err
			}
		}
		if _, ok := k.ledger.Sessions[id]; ok {
			return nil, denyAt(stage, GateSession, ErrConflict, "session %s already exists", id)
		}
		return &event.Event{Kind: event.KindSessionCreated, Actor: by.ID, Session: id, SessionRecord: &event.SessionRecord{Config: cfg}}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	se, err := k.SessionByID(id)
	return rc, se, err
}

// SessionChange is one change to a session: a state, a participant
// joining or leaving, a cross-session read grant, or a substitute.
type SessionChange = event.SessionChange

// ChangeSession applies one change. The creator or root changes state,
// grants and substitutes; an agent joins and leaves itself (or its
// creator's session admits it). A join records the agent's ring and trust
// score at that moment; the session's min_eff_score applies (§10.2).
func (k *Kernel) ChangeSession(ctx context.Context, by *Actor, id string, c SessionChange) (*Receipt, error) {
	const stage = "session"
	if err := checkReason(stage, c.Reason); err != nil {
		return nil, err
	}
	claims := []string{"session/" + id}
	if c.Granted != "" {
		claims = append(claims, "session/"+c.Granted)
	}
	return k.control(ctx, stage, claims, func(now time.Time) (*event.Event, error) {
		b, err := k.liveActor(stage, by.ID)
		if err != nil {
			return nil, err
		}
		se, ok := k.ledger.Sessions[id]
		if !ok {
			return nil, denyAt(stage, GateSession, ErrNotFound, "session %s does not exist", id)
		}
		owner := b.ID == se.Creator || b.ID == RootID
		change := event.SessionChange{Op: c.Op, Reason: c.Reason}
		switch c.Op {
		case event.SessionOpState:
			change.State = c.State
			if !owner {
				return nil, denyAt(stage, GateAuthority, ErrForbidden, "only session %s's creator or root changes its state", id)
			}
		case event.SessionOpJoin, event.SessionOpLeave:
			agent := c.Agent
			if agent == "" {
				agent = b.ID
			}
			change.Agent = agent
			if agent != b.ID && !owner {
				return nil, denyAt(stage, GateAuthority, ErrForbidden, "%s may add or remove only itself in session %s", b.ID, id)
			}
			if err := k.drawToken(stage, b, id, now); err != nil {
				return nil, err
			}
			if c.Op == event.SessionOpJoin {
				a, ok := k.ledger.Actors[agent]
				if !ok || a.IsHuman() {
					return nil, denyAt(stage, GateSession, ErrInvalid, "%s is not an agent", agent)
				}
				if !a.Active() || a.Stopped {
					return nil, denyAt(stage, GateActor, ErrForbidden, "agent %s is %s", a.ID, statusOf(a))
				}
				if q := k.quarantined(a.ID, id, now); q != nil {
					return nil, denyAt(stage, GateQuarantine, ErrForbidden, "agent %s is quarantined (%s) until %s", a.ID, q.Reason, q.ExpiresAt)
				}
				eff, _ := k.effectiveRing(a, id, now)
				change.Ring, change.EffScoreBP = int(eff), a.TrustBP
			}
		case event.SessionOpGrant:
			change.Granted = c.Granted
			if !owner {
				return nil, denyAt(stage, GateAuthority, ErrForbidden, "only session %s's creator or root grants cross-session reads", id)
			}
			if _, ok := k.ledger.Sessions[c.Granted]; !ok {
				return nil, denyAt(stage, GateSession, ErrNotFound, "session %s does not exist", c.Granted)
			}
		case event.SessionOpSubstitute:
			change.Agent = c.Agent
			if !owner {
				return nil, denyAt(stage, GateAuthority, ErrForbidden, "only session %s's creator or root registers a substitute", id)
			}
		default:
			return nil, denyAt(stage, GateForm, ErrInvalid, "op %q is not state, join, leave, grant or substitute", c.Op)
		}
		// Try the change on a copy: the rules of kernel/session decide, and
		// a refusal changes nothing.
		trial := se.Session.Clone()
		if err := applySessionChange(trial, change, event.FormatTime(now)); err != nil {
			return nil, denyAt(stage, GateSession, classOfSessionError(err), "session %s: %v", id, err)
		}
		return &event.Event{Kind: event.KindSessionChanged, Actor: b.ID, Session: id, SessionChange: &change}, nil
	})
}

// applySessionChange is the ledger's rule, run on a copy before deciding.
func applySessionChange(s *session.Session, c event.SessionChange, now string) error {
	switch c.Op {
	case event.SessionOpState:
		return s.Transition(session.State(c.State))
	case event.SessionOpJoin:
		return s.Join(session.Participant{AgentDID: c.Agent, Ring: c.Ring, EffScoreBP: uint16(c.EffScoreBP),
			SigmaRawBP: uint16(c.EffScoreBP), JoinedAt: now, IsActive: true}, uint16(c.EffScoreBP))
	case event.SessionOpLeave:
		return s.Leave(c.Agent)
	case event.SessionOpGrant:
		return s.GrantRead(c.Granted)
	case event.SessionOpSubstitute:
		return s.SetSubstitute(c.Agent)
	}
	return fmt.Errorf("op %q is unknown", c.Op)
}

func classOfSessionError(err error) error {
	if errors.Is(err, session.ErrType) || errors.Is(err, session.ErrRange) {
		return ErrInvalid
	}
	return ErrConflict
}

// sessionPathFor checks that an agent may write a changed file: paths of
// a delta are relative to the session's working directory, so they always
// lie inside it; they must still not climb out (delta.ValidatePath refuses
// "..") and the agent must be a participant. The caller holds k.mu.
func (k *Kernel) sessionPathFor(a *Actor, se *ledger.Session, p string) error {
	full := session.WorkDir(se.ID) + "/" + p
	scope := &session.Scope{Session: se.ID, Isolation: se.Config.Isolation, Granted: se.Grants}
	if err := session.IsPathAllowed(scope, full, true); err != nil {
		return denyAt("delta", GateSession, ErrForbidden, "%v", err)
	}
	return nil
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
	var d delta.Delta
	rc, err := k.control(ctx, stage, []string{"session/" + sessionID}, func(now time.Time) (*event.Event, error) {
		a, err := k.liveActor(stage, by.ID)
		if err != nil {
			return nil, err
		}
		if a.Stopped {
			return nil, denyAt(stage, GateActor, ErrForbidden, "agent %s is stopped by SIGSTOP", a.ID)
		}
		se, ok := k.ledger.Sessions[sessionID]
		switch {
		case !ok:
			return nil, denyAt(stage, GateSession, ErrNotFound, "session %s does not exist", sessionID)
		case !se.State.AcceptsActions():
			return nil, denyAt(stage, GateSession, ErrForbidden, "session %s is %s; deltas are recorded only while it is ACTIVE", sessionID, se.State)
		case !se.IsActiveParticipant(a.ID):
			return nil, denyAt(stage, GateSession, ErrForbidden, "%s is not an active participant of session %s", a.ID, sessionID)
		}
		if q := k.quarantined(a.ID, sessionID, now); q != nil {
			return nil, denyAt(stage, GateQuarantine, ErrForbidden, "agent %s is quarantined (%s) until %s", a.ID, q.Reason, q.ExpiresAt)
		}
		if eff, _ := k.effectiveRing(a, sessionID, now); !k.constraintsFor(eff).FilesystemWritable {
			return nil, denyAt(stage, GateResources, ErrForbidden, "agent %s at %s may not write files (§7.2), so it has no file changes to record", a.ID, eff)
		}
		if err := k.drawToken(stage, a, sessionID, now); err != nil {
			return nil, err
		}
		d = delta.Delta{DeltaID: id, TurnID: req.TurnID, SessionID: sessionID, AgentDID: a.ID, Timestamp: event.FormatTime(now),
			Changes: slices.Clone(req.Changes), ParentHash: se.DeltaHead}
		if err := d.Seal(); err != nil {
			return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
		}
		if _, dup := se.Turns[req.TurnID]; dup {
			return nil, denyAt(stage, GateForm, ErrConflict, "session %s already has turn %s", sessionID, req.TurnID)
		}
		files := maps.Clone(se.Files)
		if files == nil {
			files = map[string]string{}
		}
		if err := delta.ApplyChanges(files, d.Changes); err != nil {
			return nil, denyAt(stage, GateForm, ErrConflict, "delta of turn %s: %v", req.TurnID, err)
		}
		for _, c := range d.Changes {
			if err := k.sessionPathFor(a, se, c.Path); err != nil {
				return nil, err
			}
		}
		return &event.Event{Kind: event.KindSessionDelta, Actor: a.ID, Session: sessionID, Delta: &d}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return rc, &d, nil
}

// SessionChain returns a session's deltas in order with their log indices.
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
		entry, err := k.log.readEntry(ctx, i)
		if err != nil {
			return nil, nil, err
		}
		ev, err := event.Parse(entry)
		if err != nil || ev.Delta == nil {
			return nil, nil, fmt.Errorf("entry %d is not a delta: %v", i, err)
		}
		out = append(out, *ev.Delta)
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
	if err != nil {
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

// expireSessions moves sessions past their max_duration_seconds to
// TERMINATING (§10.2; the kill reason session_timeout).
func (k *Kernel) expireSessions(ctx context.Context, now time.Time) {
	k.mu.Lock()
	var ids []string
	for id, se := range k.ledger.Sessions {
		if se.Expired(now) && (se.State == session.Created || se.State == session.Handshaking || se.State == session.Active) {
			ids = append(ids, id)
		}
	}
	k.mu.Unlock()
	for _, id := range ids {
		_, err := k.control(ctx, "session", []string{"session/" + id}, func(now time.Time) (*event.Event, error) {
			se := k.ledger.Sessions[id]
			if !se.Expired(now) || !session.CanTransition(se.State, session.Terminating) {
				return nil, denyAt("session", GateSession, ErrConflict, "session %s is %s", id, se.State)
			}
			return &event.Event{Kind: event.KindSessionChanged, Actor: event.KernelActor, Session: id,
				SessionChange: &event.SessionChange{Op: event.SessionOpState, State: string(session.Terminating), Reason: "session_timeout: max_duration_seconds passed"}}, nil
		})
		if err != nil && !errors.Is(err, ErrConflict) {
			k.logger.Warn("expire session", "session", id, "err", err)
		}
	}
}
