package event

import (
	"fmt"

	"github.com/annal-dev/annal/kernel/internal/quarantine"
)

// KindQuarantineStarted and KindQuarantineEnded bracket a quarantine
// (Execution Control §13).
const (
	KindQuarantineStarted Kind = "quarantine.started"
	KindQuarantineEnded   Kind = "quarantine.ended"
)

// Quarantine is carried by quarantine.started and quarantine.ended; the
// event's Session, if set, limits it to one session.
type Quarantine struct {
	Agent     string  `json:"agent"`
	Reason    string  `json:"reason,omitempty"`
	StartedAt Instant `json:"started_at,omitzero"`
	ExpiresAt Instant `json:"expires_at,omitzero"`
	// End is "released" or "expired" (quarantine.ended).
	End string `json:"end,omitempty"`
}

// check checks a quarantine's start or end, as the event's kind says.
func (q *Quarantine) check(e *Event) error {
	if err := validateAgentRef("quarantined agent", q.Agent); err != nil {
		return err
	}
	if e.Kind == KindQuarantineStarted {
		return q.checkStart()
	}
	return q.checkEnd()
}

func (q *Quarantine) checkStart() error {
	if q.End != "" || q.StartedAt.IsZero() || q.ExpiresAt.IsZero() {
		return fmt.Errorf("quarantine of %s: a start carries started_at and expires_at, no end", q.Agent)
	}
	if err := validateQuarantineReason(q.Reason); err != nil {
		return err
	}
	if err := validateTime("quarantine start", q.StartedAt); err != nil {
		return err
	}
	if err := validateTime("quarantine expiry", q.ExpiresAt); err != nil {
		return err
	}
	if !q.ExpiresAt.After(q.StartedAt) {
		return fmt.Errorf("quarantine of %s expires at %s, not after its start %s", q.Agent, q.ExpiresAt, q.StartedAt)
	}
	return nil
}

func (q *Quarantine) checkEnd() error {
	if q.End != EndReleased && q.End != EndExpired {
		return fmt.Errorf("quarantine of %s: end %q is not released or expired", q.Agent, q.End)
	}
	if !q.StartedAt.IsZero() || !q.ExpiresAt.IsZero() {
		return fmt.Errorf("quarantine end of %s carries no times", q.Agent)
	}
	return validateText("quarantine reason", q.Reason, 1024)
}

func validateQuarantineReason(r string) error {
	if !quarantine.Reason(r).Valid() {
		return fmt.Errorf("quarantine reason %q is not one of %v (§13.1)", r, quarantine.Reasons())
	}
	return nil
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindQuarantineStarted] = carries(must("quarantine"), may("session"))
	kinds[KindQuarantineEnded] = carries(must("quarantine"), may("session"))
}
