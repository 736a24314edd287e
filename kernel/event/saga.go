package event

import (
	"fmt"
	"slices"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/saga"
)

// KindSagaStarted and KindSagaStep record a saga and each step's
// transitions (Execution Control §15).
const (
	KindSagaStarted Kind = "saga.started"
	KindSagaStep    Kind = "saga.step"
)

// SagaRecord is carried by saga.started.
type SagaRecord struct {
	ID    string          `json:"id"`
	Steps []saga.StepSpec `json:"steps"`
}

func (s *SagaRecord) check(*Event) error {
	if err := saga.ValidateSteps(s.Steps); err != nil {
		return err
	}
	if !delta.ValidIdentifier(s.ID) {
		return fmt.Errorf("saga id %q does not match the identifier pattern (§17.1)", s.ID)
	}
	return nil
}

// SagaStep is carried by saga.step: one transition of one step.
type SagaStep struct {
	Saga       string `json:"saga"`
	Step       string `json:"step"`
	Transition string `json:"transition"`
	Reason     string `json:"reason,omitempty"`
	// To is the substitute a handed-off step now belongs to.
	To string `json:"to,omitempty"`
}

// Saga step transitions.
const (
	SagaStart              = "started"
	SagaSucceeded          = "succeeded"
	SagaFailed             = "failed"
	SagaTimedOut           = "timed_out"
	SagaCompensating       = "compensating"
	SagaCompensated        = "compensated"
	SagaCompensationFailed = "compensation_failed"
)

func (s *SagaStep) check(*Event) error {
	switch {
	case !delta.ValidIdentifier(s.Saga) || !delta.ValidIdentifier(s.Step):
		return fmt.Errorf("saga step %q of %q: not valid identifiers (§17.1)", s.Step, s.Saga)
	case !slices.Contains([]string{SagaStart, SagaSucceeded, SagaFailed, SagaTimedOut, SagaCompensating, SagaCompensated, SagaCompensationFailed}, s.Transition):
		return fmt.Errorf("saga %s step %s: transition %q is unknown", s.Saga, s.Step, s.Transition)
	case s.To != "":
		return fmt.Errorf("saga %s step %s: only a kill hands a step to another agent", s.Saga, s.Step)
	}
	return validateText("saga step reason", s.Reason, 1024)
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindSagaStarted] = carries(must("saga"), may("session"))
	kinds[KindSagaStep] = carries(must("saga_step"), may("session"))
}
