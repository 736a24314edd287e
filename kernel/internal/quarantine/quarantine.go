// Package quarantine names the quarantine reasons and the default
// quarantine length of Agent Hypervisor Execution Control 1.0 §13 for the
// Annal kernel.
//
// It is vocabulary only: kernel/event refuses a quarantine.started event
// whose reason is not Valid, and the kernel refuses such a request and
// gives a quarantine without a length DefaultDuration. The quarantine
// records themselves are a fold of the log (kernel/internal/ledger), and
// the kernel enforces them in its quarantine gate; the spec (§13.4, note)
// says the reference implementation does not enforce quarantine at
// runtime.
package quarantine

import "time"

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

// Valid reports whether r is one of the six reasons of §13.1, spelt
// exactly.
func (r Reason) Valid() bool {
	switch r {
	case BehavioralDrift, LiabilityViolation, RingBreach, RateLimitExceeded, Manual, CascadeSlash:
		return true
	}
	return false
}

// Reasons lists the quarantine reasons of §13.1, in the spec's order.
func Reasons() []string {
	return []string{string(BehavioralDrift), string(LiabilityViolation), string(RingBreach), string(RateLimitExceeded), string(Manual), string(CascadeSlash)}
}

// DefaultDuration is the quarantine length when none is given (§13.2).
const DefaultDuration = 300 * time.Second
