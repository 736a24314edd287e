package ledger

import (
	"encoding/json"
	"slices"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/session"
)

// Retention of deltas (RulesRetention; kernel/delta/retention.go). A
// session.delta may carry, in place of its changes, a commitment to them
// under the subject "delta:<delta_id>" and a retain_until. The fold judges
// what the log shows of it — the chain, the turn, the session, the ring —
// and judges its paths only when given the changes (Options.Open, while the
// kernel keeps them): after erasure, as the kernel decided them. A session
// that has a sealed delta no longer keeps its files in the ledger (they are
// what the deltas say), so the fold no longer checks that later changes fit
// them; the kernel checks it when it decides, on the chain it opens.
//
// When retain_until is reached, the kernel erases the subject: a
// subject.erased event of its own, naming the session, which the fold
// allows only once the delta's retention has ended by the event's time.

// RulesRetention adds sealed deltas and the kernel's erasure of a delta's
// changes when their retention ends.
const RulesRetention = 6

// RetainedDelta is a sealed delta's subject and when its retention ends.
type RetainedDelta struct {
	Subject string        `json:"subject"`
	Until   event.Instant `json:"until"`
}

func retentionRefuse(class Class, format string, args ...any) *Violation {
	v := refuse(class, format, args...)
	v.since = RulesRetention
	return v
}

// checkSealedDelta judges a sealed delta: under rules that have them, with
// its paths in the session's scope when its changes are given.
func checkSealedDelta(c *checker, s *Session) *Violation {
	d := c.ev.Delta
	if c.l.Rules < RulesRetention {
		return retentionRefuse(Invalid, "the log is under rules %d, which has no sealed deltas (rules %d)", c.l.Rules, RulesRetention)
	}
	if c.opts.Open == nil {
		return c.l.unacknowledged(s)
	}
	raw, ok := c.opts.Open(&event.SealedPayload{Subject: d.Sealed.Subject, Commitment: d.Sealed.Commitment})
	if !ok {
		return c.l.unacknowledged(s) // erased: its paths were judged when it was decided
	}
	var changes []delta.Change
	if err := json.Unmarshal(raw, &changes); err != nil {
		return retentionRefuse(Invalid, "delta %s: its sealed changes are not a list of changes: %v", d.DeltaID, err)
	}
	if !s.FilesUnknown { // the session's first sealed delta: the ledger still keeps its files
		if v := s.fits(d, changes); v != nil {
			return v
		}
	}
	return c.changesAllowed(s, changes)
}

// changesAllowed: every changed path lies in the session's working
// directory rules and under no other participant's intent lock, and a
// STRONG session's participants have all acknowledged its files.
func (c *checker) changesAllowed(s *Session, changes []delta.Change) *Violation {
	scope := s.Scope()
	for _, ch := range changes {
		if err := session.IsPathAllowed(scope, session.WorkDir(s.ID)+"/"+ch.Path, true); err != nil {
			return refuse(Forbidden, "%v", err)
		}
		if v := c.l.lockedAgainst(s, c.ev.Actor, ch.Path); v != nil {
			return v
		}
	}
	return c.l.unacknowledged(s)
}

// applySealedDelta keeps a sealed delta's retention; the session's files
// are no longer known to the ledger.
func applySealedDelta(s *Session, d *delta.Delta) {
	until, _ := d.Sealed.RetainUntilTime()
	s.Files, s.FilesUnknown = nil, true
	s.Retained = append(s.Retained, RetainedDelta{Subject: d.Sealed.Subject, Until: event.At(until)})
}

// retentionEnded: the kernel erases a delta's changes only once their
// retention has ended, naming the delta's session.
func retentionEnded(c *checker) *Violation {
	subject := c.ev.Erasure.Subject
	if c.l.Rules < RulesRetention {
		return retentionRefuse(Forbidden, "the log is under rules %d: the kernel erases nothing on its own (rules %d)", c.l.Rules, RulesRetention)
	}
	s, ok := c.l.Sessions[c.ev.Session]
	if !ok {
		return inconsistent(NotFound, "erasure of %s names session %q, which does not exist", subject, c.ev.Session)
	}
	i := slices.IndexFunc(s.Retained, func(r RetainedDelta) bool { return r.Subject == subject })
	switch {
	case i < 0:
		return inconsistent(Conflict, "session %s keeps no delta changes under %s", s.ID, subject)
	case !s.Retained[i].Until.ReachedBy(c.at):
		return inconsistent(Conflict, "the retention of %s ends at %s, not yet at %s", subject, s.Retained[i].Until, c.at)
	}
	return nil
}

// forgetRetained drops an erased subject from its session's retained
// deltas.
func (l *Ledger) forgetRetained(sessionID, subject string) {
	if s, ok := l.Sessions[sessionID]; ok {
		s.Retained = slices.DeleteFunc(s.Retained, func(r RetainedDelta) bool { return r.Subject == subject })
		l.touch(sessionKey(s.ID))
	}
}

// DueErasures are the subjects whose retention ended by now and that are
// not yet erased, each with its session.
func (l *Ledger) DueErasures(now event.Instant) (due []RetainedDelta, sessions []string) {
	for id, s := range l.Sessions {
		for _, r := range s.Retained {
			if _, erased := l.Erased[r.Subject]; !erased && r.Until.ReachedBy(now) {
				due, sessions = append(due, r), append(sessions, id)
			}
		}
	}
	return due, sessions
}
