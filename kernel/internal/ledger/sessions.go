package ledger

import (
	"errors"
	"maps"
	"strings"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/session"
)

// Session is a session, its chain of deltas and where they are in the log.
type Session struct {
	session.Session
	CreatedIndex uint64 `json:"created_index"`
	// DeltaHead is the delta_hash of the last delta (ZeroHash before any).
	DeltaHead string `json:"delta_head"`
	// DeltaIndices are the log indices of the session's deltas, in order.
	DeltaIndices []uint64 `json:"delta_indices,omitempty"`
	// Files are the session's files (path → content hash) after its last
	// delta: what the next delta's changes must fit.
	Files map[string]string `json:"files,omitempty"`
	// Turns maps each turn id of the chain to its delta's log index.
	Turns map[string]uint64 `json:"turns,omitempty"`
	// FilesUnknown: the session has a sealed delta, so Files is not kept
	// (retention.go). Retained are its sealed deltas not yet erased.
	FilesUnknown bool            `json:"files_unknown,omitempty"`
	Retained     []RetainedDelta `json:"retained,omitempty"`

	// claimKey (sessionKey(ID)) and workDir (session.WorkDir(ID)) are made
	// once, when the session enters the ledger, not on every action in it.
	claimKey, workDir string
}

// newSession is a session as it enters the ledger, with what the rules
// derive from its id.
func newSession(s *Session) *Session {
	s.claimKey, s.workDir = sessionKey(s.ID), session.WorkDir(s.ID)
	return s
}

var zeroHash = strings.Repeat("0", 64)

// owns reports whether actor may run session s: its creator or root.
func owns(actor string, s *Session) bool { return actor == s.Creator || actor == RootID }

// session.created: an actor that may act opens a session in state CREATED
// with a valid configuration (§10).
var sessionCreatedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(sessionKey(ev.Session))
	},
	gates: byActor(newGate(GateSession, func(c *checker) *Violation {
		if _, ok := c.l.Sessions[c.ev.Session]; ok {
			return inconsistent(Conflict, "session %s already exists", c.ev.Session)
		}
		if _, err := session.New(c.ev.Session, c.ev.Actor, c.ev.SessionRecord.Config, c.at.Time); err != nil {
			return inconsistent(Invalid, "%v", err)
		}
		return nil
	})),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		se, _ := session.New(ev.Session, ev.Actor, ev.SessionRecord.Config, ev.Time.Time)
		s := newSession(&Session{Session: *se, CreatedIndex: index, DeltaHead: zeroHash})
		l.Sessions[s.ID] = s
		l.touch("session/" + s.ID)
	},
}

// session.changed: the creator or root moves a session through its states,
// grants it reads of a session they also own, and names a substitute; an
// agent joins or leaves (itself, or admitted by the owner) with its ring
// and score at that moment; the kernel ends a session whose time is up.
var sessionChangedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(sessionKey(ev.Session))
		if ch := ev.SessionChange; ch.Granted != "" {
			c.read(sessionKey(ch.Granted))
		} else if ch.Agent != "" {
			c.read(actorKey(ch.Agent))
		}
	},
	byKernel: true,
	gates: byActor(
		newGate(GateAuthority, func(c *checker) *Violation {
			s, ok := c.l.Sessions[c.ev.Session]
			if !ok {
				return noSession(inconsistent, c.ev.Session)
			}
			ch, by := c.ev.SessionChange, c.ev.Actor
			owner := owns(by, s) || by == event.KernelActor
			switch ch.Op {
			case event.SessionOpState:
				if !owner {
					return inconsistent(Forbidden, "only session %s's creator or root changes its state", s.ID)
				}
				if by == event.KernelActor && (ch.State != string(session.Terminating) || !s.Expired(c.at.Time)) {
					return refuse(Forbidden, "the kernel only ends session %s once its max_duration_seconds have passed", s.ID)
				}
			case event.SessionOpJoin, event.SessionOpLeave:
				if !owner && by != ch.Agent {
					return inconsistent(Forbidden, "%s may add or remove only itself in session %s", by, s.ID)
				}
				if by == event.KernelActor {
					return refuse(Forbidden, "the kernel does not add or remove participants")
				}
			case event.SessionOpGrant:
				if !owner || by == event.KernelActor {
					return inconsistent(Forbidden, "only session %s's creator or root grants cross-session reads", s.ID)
				}
				granted, ok := c.l.Sessions[ch.Granted]
				if !ok {
					return noSession(inconsistent, ch.Granted)
				}
				if !owns(by, granted) {
					return refuse(Forbidden, "%s may not grant reads of session %s: only its creator (%s) or root may (§11.5)", by, granted.ID, granted.Creator)
				}
			case event.SessionOpSubstitute:
				if !owner || by == event.KernelActor {
					return inconsistent(Forbidden, "only session %s's creator or root registers a substitute", s.ID)
				}
			case event.SessionOpLock, event.SessionOpUnlock, event.SessionOpAck:
				return c.l.mayCoordinate(by)
			}
			return nil
		}),
		newGate(GateSession, func(c *checker) *Violation {
			s := c.l.Sessions[c.ev.Session]
			ch := c.ev.SessionChange
			if ch.Op == event.SessionOpJoin {
				a, v := c.l.agent(ch.Agent)
				if v != nil {
					return v
				}
				if v := c.l.standing(a, c.at); v != nil {
					return v
				}
				if q := c.l.Quarantined(a.ID, s.ID, c.at); q != nil {
					return inQuarantine(a.ID, q)
				}
				if eff, _ := c.l.EffectiveRing(a, s.ID, c.at); ch.Ring != int(eff) || ch.EffScoreBP != a.TrustBP {
					return refuse(Invalid, "%s joins session %s at ring %d with %d bp; its effective ring is %d and its score %d bp", a.ID, s.ID, ch.Ring, ch.EffScoreBP, eff, a.TrustBP)
				}
			}
			change := sessionChange{by: c.ev.Actor, owner: owns(c.ev.Actor, s), head: s.DeltaHead, at: c.at} // the index is not known yet, nor needed to judge
			if err := change.apply(s.Session.Clone(), ch); err != nil {
				return inconsistent(sessionClass(err), "session %s: %v", s.ID, err)
			}
			return nil
		}),
	),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		s := l.Sessions[ev.Session]
		change := sessionChange{by: ev.Actor, owner: owns(ev.Actor, s), head: s.DeltaHead, index: index, at: ev.Time}
		_ = change.apply(&s.Session, ev.SessionChange)
		l.touch("session/" + s.ID)
	},
}

// sessionChange is what one session.changed applies with beyond the
// change: who makes it, whether they own the session, the chain head, and
// where and when it is logged.
type sessionChange struct {
	by    string
	owner bool
	head  string
	index uint64
	at    event.Instant
}

// apply is one change under kernel/session's rules; on error s is
// unchanged.
func (sc sessionChange) apply(s *session.Session, c *event.SessionChange) error {
	at := sc.at
	switch c.Op {
	case event.SessionOpLock:
		return s.TakeLock(sc.by, c.Path, sc.index)
	case event.SessionOpUnlock:
		return s.ReleaseLock(sc.by, c.Path, sc.owner)
	case event.SessionOpAck:
		return s.Acknowledge(sc.by, c.Head, sc.head)
	case event.SessionOpState:
		return s.Transition(session.State(c.State))
	case event.SessionOpJoin:
		return s.Join(session.Participant{AgentDID: c.Agent, Ring: c.Ring, EffScoreBP: uint16(c.EffScoreBP),
			SigmaRawBP: uint16(c.EffScoreBP), JoinedAt: at.String(), IsActive: true}, uint16(c.EffScoreBP))
	case event.SessionOpLeave:
		return s.Leave(c.Agent)
	case event.SessionOpGrant:
		return s.GrantRead(c.Granted)
	case event.SessionOpSubstitute:
		return s.SetSubstitute(c.Agent)
	}
	return errors.New("op " + c.Op + " is unknown")
}

func sessionClass(err error) Class {
	if errors.Is(err, session.ErrType) || errors.Is(err, session.ErrRange) || errors.Is(err, session.ErrInvalid) {
		return Invalid
	}
	return Conflict
}

// session.delta: an active participant of an ACTIVE session records one
// turn's file changes (ADR-0023), chained to the session's last delta,
// fitting the files the chain has, in paths the session's isolation lets
// it write, at a ring that may write files.
var sessionDeltaRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(sessionKey(ev.Session))
	},
	gates: byActor(
		newGate(GateSession, func(c *checker) *Violation {
			s, ok := c.l.Sessions[c.ev.Session]
			d := c.ev.Delta
			switch {
			case !ok:
				return inconsistent(NotFound, "delta for unknown session %s", c.ev.Session)
			case d.ParentHash != s.DeltaHead:
				return inconsistent(Conflict, "delta %s of session %s has parent %s, the chain's head is %s", d.DeltaID, s.ID, d.ParentHash, s.DeltaHead)
			case hasTurn(s, d.TurnID):
				return inconsistent(Conflict, "session %s already has turn %s", s.ID, d.TurnID)
			case !s.State.AcceptsActions():
				return refuse(Forbidden, "session %s is %s; deltas are recorded only while it is ACTIVE", s.ID, s.State)
			case !s.IsActiveParticipant(c.ev.Actor):
				return notParticipant(c.ev.Actor, s.ID)
			case d.Sealed != nil:
				return checkSealedDelta(c, s)
			case s.FilesUnknown:
				return c.changesAllowed(s, d.Changes)
			}
			if v := s.fits(d, d.Changes); v != nil {
				return v
			}
			return c.changesAllowed(s, d.Changes)
		}),
		newGate(GateResources, func(c *checker) *Violation {
			if c.actor.IsHuman() {
				return nil
			}
			if eff, _ := c.l.EffectiveRing(c.actor, c.ev.Session, c.at); !c.l.ConstraintsFor(eff).FilesystemWritable {
				return refuse(Forbidden, "agent %s at %s may not write files (§7.2), so it has no file changes to record", c.actor.ID, eff)
			}
			return nil
		}),
	),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		s := l.Sessions[ev.Session]
		if ev.Delta.Sealed != nil {
			applySealedDelta(s, ev.Delta)
		} else if !s.FilesUnknown {
			s.Files, _ = s.filesAfter(ev.Delta.Changes)
		}
		if s.Turns == nil {
			s.Turns = map[string]uint64{}
		}
		s.Turns[ev.Delta.TurnID] = index
		s.DeltaHead = ev.Delta.DeltaHash
		s.DeltaIndices = append(s.DeltaIndices, index)
		if l.Rules >= RulesIntentLocks {
			s.Changed(ev.Actor, s.DeltaHead)
		}
		l.touch("session/" + s.ID)
	},
}

// filesAfter is the session's files with changes applied (as far as they
// fit: the error says where they stopped); s is unchanged.
func (s *Session) filesAfter(changes []delta.Change) (map[string]string, error) {
	files := maps.Clone(s.Files)
	if files == nil {
		files = map[string]string{}
	}
	return files, delta.ApplyChanges(files, changes)
}

// fits refuses d, whose changes are changes, when they do not fit the
// files the session has (a modify or delete of a missing path, a create
// of one that exists).
func (s *Session) fits(d *delta.Delta, changes []delta.Change) *Violation {
	if _, err := s.filesAfter(changes); err != nil {
		return inconsistent(Conflict, "delta of turn %s: %v", d.TurnID, err)
	}
	return nil
}

func hasTurn(s *Session, turn string) bool {
	_, ok := s.Turns[turn]
	return ok
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindSessionCreated] = sessionCreatedRule
	rules[event.KindSessionChanged] = sessionChangedRule
	rules[event.KindSessionDelta] = sessionDeltaRule
}
