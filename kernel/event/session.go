package event

import (
	"fmt"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/session"
)

// The kinds of event about sessions (Execution Control §10–§12).
const (
	// KindSessionCreated records a new session and its configuration (§10).
	KindSessionCreated Kind = "session.created"
	// KindSessionChanged records a session's state change, a participant
	// joining or leaving, a cross-session grant or a substitute (§10–§12).
	KindSessionChanged Kind = "session.changed"
	// KindSessionDelta records one agent turn's file changes in a session
	// as an ADR-0023 SemanticDelta, hash-chained to the session's previous
	// delta (kernel/delta).
	KindSessionDelta Kind = "session.delta"
)

// checkSessionName checks the session an event names (Event.Session).
func checkSessionName(e *Event) error {
	if !delta.ValidIdentifier(e.Session) {
		return fmt.Errorf("session %q does not match ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$ (at most 256)", e.Session)
	}
	return nil
}

// SessionRecord is carried by session.created; the event's Session names it.
type SessionRecord struct {
	Config session.Config `json:"config"`
}

func (r *SessionRecord) check(*Event) error { return r.Config.Validate() }

// Session change operations.
const (
	SessionOpState      = "state"
	SessionOpJoin       = "join"
	SessionOpLeave      = "leave"
	SessionOpGrant      = "grant"
	SessionOpSubstitute = "substitute"
	// SessionOpLock and SessionOpUnlock take and release an intent lock on
	// Path (SERIALIZABLE, §11.1); SessionOpAck acknowledges the session's
	// files at Head (STRONG, §10.4). Rules version 6.
	SessionOpLock   = "lock"
	SessionOpUnlock = "unlock"
	SessionOpAck    = "ack"
)

// SessionChange is carried by session.changed.
type SessionChange struct {
	Op string `json:"op"`
	// State is the new state (op "state").
	State string `json:"state,omitempty"`
	// Agent joins, leaves or becomes the substitute.
	Agent string `json:"agent,omitempty"`
	// Ring and the scores are the joining agent's at the time (§10.3).
	Ring       int    `json:"ring,omitempty"`
	EffScoreBP uint64 `json:"eff_score_bp,omitempty"`
	// Granted is the session this one may read (op "grant", §11.5).
	Granted string `json:"granted,omitempty"`
	// Path is the path of the session's folder an intent lock is on (ops
	// "lock", "unlock"): a file, or a folder and everything below it.
	Path string `json:"path,omitempty"`
	// Head is the delta_hash of the chain head acknowledged (op "ack").
	Head   string `json:"head,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (c *SessionChange) check(*Event) error {
	switch c.Op {
	case SessionOpState:
		if !session.State(c.State).Valid() {
			return fmt.Errorf("session state %q is unknown", c.State)
		}
	case SessionOpJoin:
		if !validRing(c.Ring) || c.EffScoreBP > 10000 {
			return fmt.Errorf("join of %s: ring %d or eff_score_bp %d out of range", c.Agent, c.Ring, c.EffScoreBP)
		}
		fallthrough
	case SessionOpLeave, SessionOpSubstitute:
		if err := validateAgentRef("session participant", c.Agent); err != nil {
			return err
		}
	case SessionOpGrant:
		if !delta.ValidIdentifier(c.Granted) {
			return fmt.Errorf("granted session %q does not match the identifier pattern (§17.1)", c.Granted)
		}
	case SessionOpLock, SessionOpUnlock:
		if _, err := session.CleanPath(c.Path); err != nil {
			return fmt.Errorf("intent lock: %w", err)
		}
	case SessionOpAck:
		if !delta.ValidHash(c.Head) {
			return fmt.Errorf("acknowledged head %q is not 64 lowercase hex digits", c.Head)
		}
	default:
		return fmt.Errorf("session change op %q is not state, join, leave, grant, substitute, lock, unlock or ack", c.Op)
	}
	return validateText("session change reason", c.Reason, 1024)
}

// checkDelta checks the delta of a session.delta event: its own form, and
// that it names the event's session, actor and time.
func checkDelta(e *Event) error {
	d := e.Delta
	if d.Sealed != nil && d.Changes != nil {
		return fmt.Errorf("delta %s: a sealed delta is logged without its changes", d.DeltaID)
	}
	if err := d.Validate(); err != nil {
		return err
	}
	if d.SessionID != e.Session || d.AgentDID != e.Actor || d.Timestamp != e.Time.String() {
		return fmt.Errorf("delta %s: session_id, agent_did and timestamp must be the event's session, actor and time", d.DeltaID)
	}
	return nil
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindSessionDelta] = carries(must("session"), must("delta"))
	kinds[KindSessionCreated] = carries(must("session_record"), must("session"))
	kinds[KindSessionChanged] = carries(must("session_change"), must("session"))
}
