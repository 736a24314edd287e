package event

import (
	"fmt"
	"slices"

	"github.com/annal-dev/annal/kernel/internal/signal"
)

// The kinds of event about signals (kernel/internal/signal).
const (
	// KindSignalSent records a signal delivered to an agent and its effect.
	KindSignalSent Kind = "signal.sent"
	// KindSignalMasked records the maskable signals an agent handles itself.
	KindSignalMasked Kind = "signal.masked"
)

// Signal effects (kernel/signal).
const (
	EffectStop      = "stop"
	EffectContinue  = "continue"
	EffectTerminate = "terminate"
	EffectQueue     = "queue"
	EffectNone      = "none"
)

// SignalRecord is carried by signal.sent.
type SignalRecord struct {
	Agent  string `json:"agent"`
	Signal string `json:"signal"`
	Effect string `json:"effect"`
	Reason string `json:"reason,omitempty"`
	// Revoked lists the envelopes a terminating signal revoked.
	Revoked []string `json:"revoked,omitempty"`
}

func (s *SignalRecord) check(*Event) error {
	if err := validateAgentRef("signalled agent", s.Agent); err != nil {
		return err
	}
	if err := validateSignalName(s.Signal); err != nil {
		return err
	}
	if !slices.Contains([]string{EffectStop, EffectContinue, EffectTerminate, EffectQueue, EffectNone}, s.Effect) {
		return fmt.Errorf("signal %s: effect %q is unknown", s.Signal, s.Effect)
	}
	if s.Effect != EffectTerminate && len(s.Revoked) > 0 {
		return fmt.Errorf("signal %s: only a terminating signal revokes envelopes", s.Signal)
	}
	for _, id := range s.Revoked {
		if !ValidEnvelopeID(id) {
			return fmt.Errorf("signal %s: revoked envelope %q is not an envelope id", s.Signal, id)
		}
	}
	return validateText("signal reason", s.Reason, 1024)
}

// SignalMask is carried by signal.masked.
type SignalMask struct {
	Agent string   `json:"agent"`
	Mask  []string `json:"mask"`
}

func (m *SignalMask) check(*Event) error {
	if err := validateAgentRef("signal mask agent", m.Agent); err != nil {
		return err
	}
	return validateMask(m.Mask)
}

// validateSignalName accepts a signal's canonical name only ("SIGSTOP").
func validateSignalName(name string) error {
	s, err := signal.Parse(name)
	if err != nil {
		return err
	}
	if s.String() != name {
		return fmt.Errorf("signal %q is not written as %s", name, s)
	}
	return nil
}

// validateMask accepts distinct maskable signals, canonical names sorted.
func validateMask(names []string) error {
	var m signal.Mask
	for _, n := range names {
		if err := validateSignalName(n); err != nil {
			return err
		}
		s, _ := signal.Parse(n)
		if m.Has(s) {
			return fmt.Errorf("signal mask names %s twice", n)
		}
		var err error
		if m, err = m.With(s); err != nil {
			return err
		}
	}
	if !slices.IsSorted(names) {
		return fmt.Errorf("signal mask must list names sorted")
	}
	return nil
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindSignalSent] = carries(must("signal"))
	kinds[KindSignalMasked] = carries(must("signal_mask"))
}
