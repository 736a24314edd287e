package ledger

// The refusals several rules give, each written once: a caller (or a test)
// that reads one sees the same words whichever gate gave it.

// noActor refuses an event that names actor id, which does not exist: a
// reference to nothing, refused at every rules version. class is NotFound,
// or Unauthenticated for the event's own actor (no one holds its
// credential).
func noActor(class Class, id string) *Violation {
	return inconsistent(class, "actor %s does not exist", id)
}

// noSession refuses an event that names session id, which does not exist.
// level is refuse, or inconsistent where the rule's apply relies on the
// session.
func noSession(level func(Class, string, ...any) *Violation, id string) *Violation {
	return level(NotFound, "session %s does not exist", id)
}

// inQuarantine refuses an act of agent id, which q quarantines (§13).
func inQuarantine(id string, q *Quarantine) *Violation {
	return refuse(Forbidden, "agent %s is quarantined (%s) until %s", id, q.Reason, q.ExpiresAt)
}

// notParticipant refuses an act of actor in session sess, of which it is
// not an active participant.
func notParticipant(actor, sess string) *Violation {
	return refuse(Forbidden, "%s is not an active participant of session %s", actor, sess)
}

// undefinedPolicy refuses an act of an agent bound to policy name, which
// is not defined: a policy gate fails closed.
func undefinedPolicy(name string) *Violation {
	return refuse(Forbidden, "policy %s: not defined (fail closed)", name)
}

// sessionWork is a kind of work done in a session: whom, beside its active
// participants, the session admits to it, and how a session that is not
// ACTIVE refuses it.
type sessionWork struct {
	// ownersToo: the session's creator and root do it too, participants
	// or not.
	ownersToo bool
	// notActive is the refusal's format, of the session's id and state.
	notActive string
}

var (
	// actionWork is an action (§10.1).
	actionWork = sessionWork{ownersToo: true, notActive: "session %s is %s; actions run only in an ACTIVE session (§10.1)"}
	// sagaWork is a saga's start or the report of one of its steps (§15):
	// only an active participant runs a saga in a session.
	sagaWork = sessionWork{notActive: "session %s is %s, not ACTIVE"}
)

// sessionStanding checks that actor may do work in session sess, whose
// state is se (nil if no session of that name exists): the session is
// ACTIVE and admits the actor. No session: nothing to check.
func sessionStanding(actor, sess string, se *Session, work sessionWork) *Violation {
	switch {
	case sess == "":
		return nil
	case se == nil:
		return noSession(refuse, sess)
	case !se.State.AcceptsActions():
		return refuse(Forbidden, work.notActive, sess, se.State)
	case !se.IsActiveParticipant(actor) && !(work.ownersToo && owns(actor, se)):
		return notParticipant(actor, sess)
	}
	return nil
}

// sessionExists checks that the session an event names, if it names one,
// exists.
func (l *Ledger) sessionExists(sess string) *Violation {
	if _, ok := l.Sessions[sess]; sess != "" && !ok {
		return noSession(refuse, sess)
	}
	return nil
}
