package session

import (
	"fmt"
	"time"
)

// Rings are 0..3, 0 the most privileged (§3).
const (
	MinRing = 0
	MaxRing = 3
)

// Participant is a session participant (§10.3) in its event form: scores in
// basis points (0..10000), the join time as an RFC 3339 string.
type Participant struct {
	AgentDID   string `json:"agent_did"`
	Ring       int    `json:"ring"`
	SigmaRawBP uint16 `json:"sigma_raw_bp"`
	EffScoreBP uint16 `json:"eff_score_bp"`
	JoinedAt   string `json:"joined_at"`
	IsActive   bool   `json:"is_active"`
}

// Validate checks p against §10.3 and §17.4: a valid agent identifier
// (§17.1), ring in [0, 3], sigma_raw and eff_score in [0, 10000] bp, and
// joined_at an RFC 3339 time. Every error wraps ErrRange and names the field.
func (p Participant) Validate() error {
	if !validID(p.AgentDID) {
		return fmt.Errorf("%w: agent_did %q is not a valid identifier (§17.1)", ErrRange, clipString(p.AgentDID))
	}
	if p.Ring < MinRing || p.Ring > MaxRing {
		return fmt.Errorf("%w: ring %d must be in [%d, %d]", ErrRange, p.Ring, MinRing, MaxRing)
	}
	if p.SigmaRawBP > MaxScore {
		return fmt.Errorf("%w: sigma_raw_bp %d must be in [0, %d]", ErrRange, p.SigmaRawBP, MaxScore)
	}
	if p.EffScoreBP > MaxScore {
		return fmt.Errorf("%w: eff_score_bp %d must be in [0, %d]", ErrRange, p.EffScoreBP, MaxScore)
	}
	if _, err := time.Parse(time.RFC3339, p.JoinedAt); err != nil {
		return fmt.Errorf("%w: joined_at %q must be an RFC 3339 time", ErrRange, clipString(p.JoinedAt))
	}
	return nil
}

func clipString(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
