// Package quarantine keeps the quarantine records of Agent Hypervisor
// Execution Control 1.0 §13 for the Annal kernel.
//
// A Set is a pure, deterministic state: no clock is read, every time is an
// argument, and Records and Tick return records in a fixed order (by agent,
// then session). The kernel logs each decision and replays it through the
// same methods. A method that returns an error MUST leave the Set unchanged.
// A Set is not safe for concurrent use; the kernel serialises its state.
//
// A record is keyed by (agent, session). Session "" means every session: an
// agent quarantined for "" is quarantined in every session. A session-scoped
// record does not apply to a query for session "".
//
// A record is quarantining at now iff it is active and now is before
// ExpiresAt; a record past its expiry is not quarantining even before Tick
// removes it. Quarantining an agent that is already quarantining for the
// same key extends it: ExpiresAt becomes the later of the two expiries,
// StartedAt stays, and Reason becomes the newest reason. Release and Tick
// remove records from the Set (the records they return have Active false),
// so the Set holds only what is in force or awaiting Tick.
//
// The spec (§13.4, note) says the reference implementation does not enforce
// quarantine at runtime; Annal's kernel does, by calling IsQuarantined in its
// pipeline.
package quarantine

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/annal-dev/annal/internal/strictjson"
)

// Reason is why an agent is quarantined (§13.1).
type Reason string

// The quarantine reasons of §13.1.
const (
	BehavioralDrift    Reason = "behavioral_drift"
	LiabilityViolation Reason = "liability_violation"
	RingBreach         Reason = "ring_breach"
	RateLimitExceeded  Reason = "rate_limit_exceeded"
	Manual             Reason = "manual"
	CascadeSlash       Reason = "cascade_slash"
)

// Valid reports whether r is one of the six reasons of §13.1.
func (r Reason) Valid() bool {
	switch r {
	case BehavioralDrift, LiabilityViolation, RingBreach, RateLimitExceeded, Manual, CascadeSlash:
		return true
	}
	return false
}

// Reasons lists the quarantine reasons of §13.1.
func Reasons() []string {
	return []string{string(BehavioralDrift), string(LiabilityViolation), string(RingBreach), string(RateLimitExceeded), string(Manual), string(CascadeSlash)}
}

const (
	// DefaultDuration is the quarantine length when none is given (§13.2).
	DefaultDuration = 300 * time.Second
	// MaxDuration bounds one quarantine, so that expiries stay representable.
	MaxDuration = 366 * 24 * time.Hour
)

// Errors of quarantine operations.
var (
	ErrReason         = errors.New("unknown quarantine reason")
	ErrInvalid        = errors.New("invalid quarantine argument")
	ErrNotQuarantined = errors.New("agent is not quarantined")
)

// Record is one quarantine (§13.3). In JSON, times are RFC 3339 strings with
// nanoseconds, in UTC.
type Record struct {
	Agent     string
	Session   string
	Reason    Reason
	StartedAt time.Time
	ExpiresAt time.Time
	Active    bool
}

type recordJSON struct {
	Agent     string `json:"agent_did"`
	Session   string `json:"session_id"`
	Reason    Reason `json:"reason"`
	StartedAt string `json:"started_at"`
	ExpiresAt string `json:"expires_at"`
	Active    bool   `json:"is_active"`
}

// MarshalJSON writes r with the §13.3 field names.
func (r Record) MarshalJSON() ([]byte, error) {
	return json.Marshal(recordJSON{r.Agent, r.Session, r.Reason,
		r.StartedAt.UTC().Format(time.RFC3339Nano), r.ExpiresAt.UTC().Format(time.RFC3339Nano), r.Active})
}

// UnmarshalJSON reads what MarshalJSON writes, strictly (member names
// exactly as MarshalJSON writes them, none unknown or twice), refusing an
// unknown reason and unparseable times.
func (r *Record) UnmarshalJSON(data []byte) error {
	var j recordJSON
	if err := strictjson.Decode(data, &j); err != nil {
		return fmt.Errorf("%w: record: %v", ErrInvalid, err)
	}
	if !j.Reason.Valid() {
		return fmt.Errorf("%w: %q", ErrReason, j.Reason)
	}
	s, err := time.Parse(time.RFC3339Nano, j.StartedAt)
	if err != nil {
		return fmt.Errorf("%w: started_at: %v", ErrInvalid, err)
	}
	e, err := time.Parse(time.RFC3339Nano, j.ExpiresAt)
	if err != nil {
		return fmt.Errorf("%w: expires_at: %v", ErrInvalid, err)
	}
	*r = Record{j.Agent, j.Session, j.Reason, s.UTC(), e.UTC(), j.Active}
	return nil
}

// In reports whether r quarantines its agent at now.
func (r Record) In(now time.Time) bool { return r.Active && now.Before(r.ExpiresAt) }

type key struct{ agent, session string }

// Set holds the quarantine records in force. The zero Set is empty and ready.
type Set struct {
	m map[key]*Record
}

// Quarantine quarantines agent in session ("" for every session) for
// reason, from start for d (d ≤ 0 means DefaultDuration), and returns the
// record now in force. It MUST refuse an unknown reason, an empty agent and
// d > MaxDuration. See the package comment for extension.
func (s *Set) Quarantine(agent, session string, reason Reason, start time.Time, d time.Duration) (Record, error) {
	if !reason.Valid() {
		return Record{}, fmt.Errorf("%w: %q (§13.1)", ErrReason, reason)
	}
	if agent == "" {
		return Record{}, fmt.Errorf("%w: empty agent", ErrInvalid)
	}
	if d > MaxDuration {
		return Record{}, fmt.Errorf("%w: duration %v exceeds %v", ErrInvalid, d, MaxDuration)
	}
	if d <= 0 {
		d = DefaultDuration
	}
	start = start.Round(0).UTC()
	exp := start.Add(d)
	if s.m == nil {
		s.m = map[key]*Record{}
	}
	k := key{agent, session}
	if old, ok := s.m[k]; ok && old.In(start) {
		if exp.After(old.ExpiresAt) {
			old.ExpiresAt = exp
		}
		old.Reason = reason
		return *old, nil
	}
	r := &Record{Agent: agent, Session: session, Reason: reason, StartedAt: start, ExpiresAt: exp, Active: true}
	s.m[k] = r
	return *r, nil
}

// Release ends the quarantine of agent in session, removing its record. It
// acts on the exact key: releasing a session does not release an
// every-session quarantine. It MUST refuse if there is no record for the
// key. A record past its expiry that Tick has not yet removed is still
// released (Release has no clock to tell).
func (s *Set) Release(agent, session string) error {
	if _, ok := s.m[key{agent, session}]; !ok {
		return fmt.Errorf("%w: %q in session %q", ErrNotQuarantined, agent, session)
	}
	delete(s.m, key{agent, session})
	return nil
}

// IsQuarantined reports whether agent is quarantined in session at now,
// either for that session or for every session, and returns the record in
// force (the one that expires later if both are).
func (s *Set) IsQuarantined(agent, session string, now time.Time) (Record, bool) {
	var best *Record
	for _, k := range []key{{agent, session}, {agent, ""}} {
		if r, ok := s.m[k]; ok && r.In(now) && (best == nil || r.ExpiresAt.After(best.ExpiresAt)) {
			best = r
		}
	}
	if best == nil {
		return Record{}, false
	}
	return *best, true
}

// Tick removes every record that is not quarantining at now and returns
// them, inactive, sorted by agent then session (§13.4).
func (s *Set) Tick(now time.Time) []Record {
	var out []Record
	for k, r := range s.m {
		if !r.In(now) {
			c := *r
			c.Active = false
			out = append(out, c)
			delete(s.m, k)
		}
	}
	sortRecords(out)
	return out
}

// Records returns every record in the Set, sorted by agent then session.
func (s *Set) Records() []Record {
	out := make([]Record, 0, len(s.m))
	for _, r := range s.m {
		out = append(out, *r)
	}
	sortRecords(out)
	return out
}

// Len returns the number of records in the Set.
func (s *Set) Len() int { return len(s.m) }

func sortRecords(rs []Record) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Agent != rs[j].Agent {
			return rs[i].Agent < rs[j].Agent
		}
		return rs[i].Session < rs[j].Session
	})
}
