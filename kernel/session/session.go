package session

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"
)

// MaxGrants bounds the sessions one session may be granted to read.
const MaxGrants = 256

// Errors of session changes. Each refusal wraps one of them and names the
// rule; a refused change leaves the session unchanged.
var (
	ErrState          = errors.New("session state does not allow this")
	ErrTransition     = errors.New("session state transition not allowed")
	ErrFull           = errors.New("session is full")
	ErrScore          = errors.New("effective score below the session minimum")
	ErrAlreadyJoined  = errors.New("agent is already an active participant")
	ErrNotParticipant = errors.New("agent is not an active participant")
	ErrIsolation      = errors.New("isolation level does not allow cross-session access")
	ErrInvalid        = errors.New("invalid session argument")
)

// Session is one session's state. Participants is keyed by agent; Grants is
// sorted and holds the sessions this one may read (§11.5); Substitute is the
// agent the kill switch hands in-flight steps to (§12.3), "" for none.
// CreatedAt is RFC 3339 with nanoseconds, in UTC.
type Session struct {
	ID           string                  `json:"session_id"`
	Creator      string                  `json:"creator"`
	Config       Config                  `json:"config"`
	State        State                   `json:"state"`
	Participants map[string]*Participant `json:"participants"`
	Grants       []string                `json:"grants"`
	Substitute   string                  `json:"substitute,omitempty"`
	CreatedAt    string                  `json:"created_at"`
	// Locks are the intent locks held now, by path (SERIALIZABLE), Clock
	// the vector clock of the participants' writes (SERIALIZABLE), Acks the
	// chain head each participant last acknowledged (STRONG); see
	// coordination.go.
	Locks map[string]*Lock  `json:"locks,omitempty"`
	Clock map[string]uint64 `json:"clock,omitempty"`
	Acks  map[string]string `json:"acks,omitempty"`
}

// New returns a session in state CREATED, after checking the identifiers
// (§17.1) and the configuration (§17.3).
func New(id, creator string, cfg Config, createdAt time.Time) (*Session, error) {
	if !validID(id) {
		return nil, fmt.Errorf("%w: session id %q is not a valid identifier (§17.1)", ErrInvalid, clipString(id))
	}
	if !validID(creator) {
		return nil, fmt.Errorf("%w: creator %q is not a valid identifier (§17.1)", ErrInvalid, clipString(creator))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Session{
		ID:           id,
		Creator:      creator,
		Config:       cfg,
		State:        Created,
		Participants: map[string]*Participant{},
		Grants:       []string{},
		CreatedAt:    createdAt.UTC().Format(time.RFC3339Nano),
	}, nil
}

// Clone returns a deep copy of s.
func (s *Session) Clone() *Session {
	c := *s
	c.Participants = make(map[string]*Participant, len(s.Participants))
	for k, p := range s.Participants {
		pc := *p
		c.Participants[k] = &pc
	}
	c.Grants = append([]string{}, s.Grants...)
	if s.Locks != nil {
		c.Locks = make(map[string]*Lock, len(s.Locks))
		for p, l := range s.Locks {
			lc := *l
			c.Locks[p] = &lc
		}
	}
	c.Clock, c.Acks = maps.Clone(s.Clock), maps.Clone(s.Acks)
	return &c
}

// ActiveCount returns the number of active participants.
func (s *Session) ActiveCount() int {
	n := 0
	for _, p := range s.Participants {
		if p.IsActive {
			n++
		}
	}
	return n
}

// IsActiveParticipant reports whether agent is an active participant.
func (s *Session) IsActiveParticipant(agent string) bool {
	p, ok := s.Participants[agent]
	return ok && p.IsActive
}

// Join adds p as an active participant. effScore is the effective score the
// kernel computed for the agent; it replaces p.EffScoreBP, so a caller's
// claim about its own score never counts. Join MUST refuse, changing
// nothing: a state that does not accept joins (HANDSHAKING only), an invalid
// participant (§17.4), an agent already active, a session whose active
// participants number max_participants, and effScore below min_eff_score.
func (s *Session) Join(p Participant, effScore uint16) error {
	if !s.State.AcceptsParticipants() {
		return fmt.Errorf("%w: session %s is %s; joins are accepted in HANDSHAKING only", ErrState, s.ID, s.State)
	}
	p.EffScoreBP = effScore
	p.IsActive = true
	if err := p.Validate(); err != nil {
		return err
	}
	if s.IsActiveParticipant(p.AgentDID) {
		return fmt.Errorf("%w: %s in session %s", ErrAlreadyJoined, p.AgentDID, s.ID)
	}
	if s.ActiveCount() >= s.Config.MaxParticipants {
		return fmt.Errorf("%w: session %s has %d active participants, max_participants %d", ErrFull, s.ID, s.ActiveCount(), s.Config.MaxParticipants)
	}
	if effScore < s.Config.MinEffScore {
		return fmt.Errorf("%w: %s has %d bp, session %s requires min_eff_score %d bp", ErrScore, p.AgentDID, effScore, s.ID, s.Config.MinEffScore)
	}
	if s.Participants == nil {
		s.Participants = map[string]*Participant{}
	}
	s.Participants[p.AgentDID] = &p
	return nil
}

// Leave marks agent inactive. It MUST refuse an agent that is not an active
// participant, and an ARCHIVED session (read-only). If agent was the
// substitute, the session no longer has one.
func (s *Session) Leave(agent string) error {
	if s.State == Archived {
		return fmt.Errorf("%w: session %s is ARCHIVED (read-only)", ErrState, s.ID)
	}
	if !s.IsActiveParticipant(agent) {
		return fmt.Errorf("%w: %q in session %s", ErrNotParticipant, clipString(agent), s.ID)
	}
	s.Participants[agent].IsActive = false
	if s.Substitute == agent {
		s.Substitute = ""
	}
	s.dropLocksOf(agent)
	return nil
}

// Transition moves the session to state to if CanTransition allows it.
func (s *Session) Transition(to State) error {
	if !CanTransition(s.State, to) {
		return fmt.Errorf("%w: session %s cannot go from %s to %q (§10.1)", ErrTransition, s.ID, s.State, to)
	}
	s.State = to
	if to == Terminating {
		s.Locks = nil // no write is accepted any more: nothing to keep out
	}
	return nil
}

// mutable reports whether grants and the substitute may still change.
func (s *Session) mutable() error {
	if s.State == Terminating || s.State == Archived {
		return fmt.Errorf("%w: session %s is %s", ErrState, s.ID, s.State)
	}
	return nil
}

// GrantRead lets this session read session other (§11.5). It MUST refuse
// unless the session's isolation is READ_COMMITTED (the error wraps
// ErrIsolation); it also refuses its own id, an invalid id, more than
// MaxGrants grants, and a TERMINATING or ARCHIVED session. Granting a
// session already granted changes nothing and is not an error.
func (s *Session) GrantRead(other string) error {
	if s.Config.Isolation != ReadCommitted {
		return fmt.Errorf("%w: session %s has isolation %s; cross-session grants need READ_COMMITTED (§11.5)", ErrIsolation, s.ID, s.Config.Isolation)
	}
	if err := s.mutable(); err != nil {
		return err
	}
	if !validID(other) {
		return fmt.Errorf("%w: granted session %q is not a valid identifier (§17.1)", ErrInvalid, clipString(other))
	}
	if other == s.ID {
		return fmt.Errorf("%w: session %s cannot be granted to itself", ErrInvalid, s.ID)
	}
	i := sort.SearchStrings(s.Grants, other)
	if i < len(s.Grants) && s.Grants[i] == other {
		return nil
	}
	if len(s.Grants) >= MaxGrants {
		return fmt.Errorf("%w: session %s already has %d grants (limit %d)", ErrInvalid, s.ID, len(s.Grants), MaxGrants)
	}
	g := make([]string, 0, len(s.Grants)+1)
	g = append(g, s.Grants[:i]...)
	g = append(g, other)
	g = append(g, s.Grants[i:]...)
	s.Grants = g
	return nil
}

// SetSubstitute names the agent the kill switch hands in-flight steps to
// (§12.3); "" clears it. The substitute MUST be an active participant (the
// creator too must have joined). The kill switch never hands a killed
// agent's steps back to that same agent. Refused in TERMINATING and ARCHIVED.
func (s *Session) SetSubstitute(agent string) error {
	if err := s.mutable(); err != nil {
		return err
	}
	if agent != "" && !s.IsActiveParticipant(agent) {
		return fmt.Errorf("%w: substitute %q in session %s", ErrNotParticipant, clipString(agent), s.ID)
	}
	s.Substitute = agent
	return nil
}

// Scope returns the isolation scope of an agent acting in this session.
func (s *Session) Scope() *Scope {
	return &Scope{Session: s.ID, Isolation: s.Config.Isolation, Granted: append([]string{}, s.Grants...)}
}

// Deadline returns created_at + max_duration_seconds. ok is false if
// CreatedAt does not parse.
func (s *Session) Deadline() (t time.Time, ok bool) {
	c, err := time.Parse(time.RFC3339Nano, s.CreatedAt)
	if err != nil {
		return time.Time{}, false
	}
	return c.Add(time.Duration(s.Config.MaxDurationSeconds) * time.Second), true
}

// Expired reports whether now is at or after the deadline. A session whose
// CreatedAt does not parse counts as expired (fail closed).
func (s *Session) Expired(now time.Time) bool {
	d, ok := s.Deadline()
	return !ok || !now.Before(d)
}
