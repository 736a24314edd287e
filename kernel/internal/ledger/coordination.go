package ledger

import (
	"strings"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/session"
)

// Coordination of a session's writers (kernel/session/coordination.go):
// intent locks under SERIALIZABLE (§11.1), acknowledgements under STRONG
// (§10.4). Before RulesIntentLocks both were accepted and did nothing; a
// log written then folds as it did.

// RulesIntentLocks makes SERIALIZABLE and STRONG do what they say: the
// session.changed ops lock, unlock and ack, a write refused under another
// participant's intent lock, a change of a STRONG session's files refused
// until every participant has acknowledged the files it changes.
const RulesIntentLocks = 6

// mayCoordinate: lock, unlock and ack are a participant's (or, to release
// a lock, the owner's) under RulesIntentLocks; the kernel takes none.
func (l *Ledger) mayCoordinate(by string) *Violation {
	if l.Rules < RulesIntentLocks {
		return refuse(Invalid, "the log is under rules %d, which has no intent locks or acknowledgements (rules %d)", l.Rules, RulesIntentLocks)
	}
	if by == event.KernelActor {
		return refuse(Forbidden, "the kernel takes no intent locks and acknowledges nothing")
	}
	return nil
}

// lockedAgainst refuses a write by agent of p, a path of session s's
// folder, that another participant's intent lock covers.
func (l *Ledger) lockedAgainst(s *Session, agent, p string) *Violation {
	if l.Rules < RulesIntentLocks {
		return nil
	}
	if held, lock := s.LockedAgainst(agent, p); lock != nil {
		return refuse(Conflict, "%s in session %s is under %s's intent lock on %s (index %d): it may be written once the lock is released (§11.1)", p, s.ID, lock.Holder, held, lock.Index)
	}
	return nil
}

// unacknowledged refuses a change of a STRONG session's files while an
// active participant, its author too, has not acknowledged the files as
// they are.
func (l *Ledger) unacknowledged(s *Session) *Violation {
	if l.Rules < RulesIntentLocks {
		return nil
	}
	if missing := s.Unacknowledged(s.DeltaHead, zeroHash); len(missing) > 0 {
		return refuse(Conflict, "session %s is STRONG: %s must acknowledge its files at %s before they change (§10.4)", s.ID, strings.Join(missing, ", "), s.DeltaHead)
	}
	return nil
}

// sessionWrite refuses an action's write of p, a target under sessions/,
// that falls in the acting session's folder under another participant's
// intent lock.
func (c *checker) sessionWrite(p string) *Violation {
	s := c.actionFacts().session
	if s == nil {
		return nil
	}
	dir := s.workDir
	if dir == "" {
		dir = session.WorkDir(s.ID)
	}
	rel, ok := strings.CutPrefix(p, dir+"/")
	if !ok {
		return nil
	}
	return c.l.lockedAgainst(s, c.actor.ID, rel)
}
