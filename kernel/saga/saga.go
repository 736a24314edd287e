// Package saga implements saga orchestration of Agent Hypervisor Execution
// Control 1.0 §15 for the Annal kernel: multi-step work whose completed steps
// are undone, in reverse order, when a step fails for good.
//
// A Saga is a deterministic state machine with no clock and no I/O; the
// kernel logs every transition and replays it through the same methods. A
// method that refuses a move MUST leave the Saga unchanged. The kernel does
// not run steps: the agent that started a saga runs each step and reports
// every start and result, the kernel logs each transition (and times steps
// out), and RetryDelay is the backoff a failed step waits before it starts
// again (the kernel's rules refuse an earlier start, rules 6). A step's
// compensation is run by its agent, or, when its spec names one Annal can
// run (Compensate), by the orchestrator outside the kernel
// (internal/sagarun, annal sagas run), as an execute the kernel decides.
//
// # Machine
//
// Steps run strictly in order, one at a time. A step goes pending → running
// → succeeded, or running → failed. A failed step whose attempts (starts) do
// not exceed MaxRetries may be started again; otherwise the saga goes from
// running to compensating (a timeout counts as a failure). Abort sends a
// running saga to compensating at once (the kill switch's compensation).
// While compensating, NextCompensation names the step to undo: the previously
// succeeded steps in reverse order (§15.3); each goes succeeded →
// compensating → compensated or compensation_failed. A compensation failure
// does not stop the others. When none is left the saga is compensated, or
// failed if any compensation failed. A saga that fails before any step
// succeeded is compensated at once, having nothing to undo. A saga whose
// steps all succeed is succeeded. succeeded, compensated and failed are
// final.
package saga

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/ring"
)

// StepState is the state of one step.
type StepState string

// Step states.
const (
	StepPending            StepState = "pending"
	StepRunning            StepState = "running"
	StepSucceeded          StepState = "succeeded"
	StepFailed             StepState = "failed"
	StepCompensating       StepState = "compensating"
	StepCompensated        StepState = "compensated"
	StepCompensationFailed StepState = "compensation_failed"
)

// State is the state of a saga.
type State string

// Saga states.
const (
	Running      State = "running"
	Succeeded    State = "succeeded"
	Compensating State = "compensating"
	Compensated  State = "compensated"
	Failed       State = "failed"
)

// Defaults (§15.2) and limits.
const (
	DefaultMaxRetries     = 2
	DefaultRetryDelay     = time.Second // base of the linear backoff
	DefaultTimeoutSeconds = 300
	MaxMaxRetries         = 10
	MaxTimeoutSeconds     = 86400
	MaxSteps              = 64
	MaxIDLength           = ring.MaxIdentifierLen
	MaxNameLength         = 1024 // Action, Compensation, error reasons
)

// Errors. Every refusal wraps one of them.
var (
	ErrInvalid    = errors.New("invalid saga")
	ErrTransition = errors.New("saga transition not allowed")
)

// StepSpec describes one step. Action and Compensation are opaque names the
// executor and compensator interpret; Compensation may be empty. Compensate,
// if set, is a compensation Annal runs itself (compensate.go); a step
// without one is compensated by its agent.
type StepSpec struct {
	ID             string      `json:"id"`
	Action         string      `json:"action"`
	Compensation   string      `json:"compensation"`
	Compensate     *Compensate `json:"compensate,omitempty"`
	MaxRetries     int         `json:"max_retries"`
	TimeoutSeconds int         `json:"timeout_seconds"`
}

// NewStepSpec returns a step with the §15.2 defaults: 2 retries, 300 s.
func NewStepSpec(id, action, compensation string) StepSpec {
	return StepSpec{ID: id, Action: action, Compensation: compensation, MaxRetries: DefaultMaxRetries, TimeoutSeconds: DefaultTimeoutSeconds}
}

// Validate checks a step: an identifier per §17.1, a non-empty Action,
// names at most MaxNameLength bytes, MaxRetries in [0, 10] and
// TimeoutSeconds in [1, 86400], and Compensate valid if set. There is no implicit default: a zero
// TimeoutSeconds is refused (use NewStepSpec).
func (s StepSpec) Validate() error {
	if !validID(s.ID) {
		return fmt.Errorf("%w: step id %q is not a valid identifier (§17.1)", ErrInvalid, clip(s.ID))
	}
	if s.Action == "" || len(s.Action) > MaxNameLength || len(s.Compensation) > MaxNameLength {
		return fmt.Errorf("%w: step %s: action must be non-empty and action and compensation at most %d bytes", ErrInvalid, s.ID, MaxNameLength)
	}
	if s.MaxRetries < 0 || s.MaxRetries > MaxMaxRetries {
		return fmt.Errorf("%w: step %s: max_retries %d must be in [0, %d]", ErrInvalid, s.ID, s.MaxRetries, MaxMaxRetries)
	}
	if s.TimeoutSeconds < 1 || s.TimeoutSeconds > MaxTimeoutSeconds {
		return fmt.Errorf("%w: step %s: timeout_seconds %d must be in [1, %d]", ErrInvalid, s.ID, s.TimeoutSeconds, MaxTimeoutSeconds)
	}
	if s.Compensate != nil {
		if err := s.Compensate.Validate(); err != nil {
			return fmt.Errorf("step %s: %w", s.ID, err)
		}
	}
	return nil
}

// Step is one step's state. Attempts counts its starts; Error is the reason
// of its last failure.
type Step struct {
	Spec     StepSpec  `json:"spec"`
	State    StepState `json:"state"`
	Attempts int       `json:"attempts"`
	Error    string    `json:"error,omitempty"`
	// Agent runs the step when it is not the saga's agent: a kill handed
	// the step to a substitute (§12.3).
	Agent string `json:"agent,omitempty"`
}

// Saga is a saga's state.
type Saga struct {
	ID      string  `json:"saga_id"`
	Agent   string  `json:"agent_did"`
	Session string  `json:"session_id"`
	Steps   []*Step `json:"steps"`
	State   State   `json:"state"`
	Error   string  `json:"error,omitempty"` // why compensation began
}

// New returns a running saga with every step pending, after validating the
// identifiers and 1 to MaxSteps steps with distinct ids.
func New(id, agent, session string, specs []StepSpec) (*Saga, error) {
	for _, f := range []struct{ name, v string }{{"saga id", id}, {"agent", agent}, {"session", session}} {
		if !validID(f.v) && (f.name != "session" || f.v != "") {
			return nil, fmt.Errorf("%w: %s %q is not a valid identifier (§17.1)", ErrInvalid, f.name, clip(f.v))
		}
	}
	if err := ValidateSteps(specs); err != nil {
		return nil, fmt.Errorf("saga %s: %w", id, err)
	}
	s := &Saga{ID: id, Agent: agent, Session: session, State: Running}
	for _, sp := range specs {
		s.Steps = append(s.Steps, &Step{Spec: sp, State: StepPending})
	}
	return s, nil
}

// ValidateSteps checks 1 to MaxSteps valid steps with distinct ids.
func ValidateSteps(specs []StepSpec) error {
	if len(specs) == 0 || len(specs) > MaxSteps {
		return fmt.Errorf("%w: %d steps; 1 to %d allowed", ErrInvalid, len(specs), MaxSteps)
	}
	seen := map[string]bool{}
	for _, sp := range specs {
		if err := sp.Validate(); err != nil {
			return err
		}
		if seen[sp.ID] {
			return fmt.Errorf("%w: step id %s twice", ErrInvalid, sp.ID)
		}
		seen[sp.ID] = true
	}
	return nil
}

// Clone returns a deep copy of s.
func (s *Saga) Clone() *Saga {
	c := *s
	c.Steps = make([]*Step, len(s.Steps))
	for i, st := range s.Steps {
		x := *st
		c.Steps[i] = &x
	}
	return &c
}

// Step returns the step with id, or nil.
func (s *Saga) Step(id string) *Step {
	for _, st := range s.Steps {
		if st.Spec.ID == id {
			return st
		}
	}
	return nil
}

// Current returns the first step that has not succeeded, or nil.
func (s *Saga) Current() *Step {
	for _, st := range s.Steps {
		if st.State != StepSucceeded {
			return st
		}
	}
	return nil
}

func (s *Saga) refuse(format string, a ...any) error {
	return fmt.Errorf("%w: saga %s: %s", ErrTransition, s.ID, fmt.Sprintf(format, a...))
}

// current returns the current step if the saga is running and id names it.
func (s *Saga) current(id string) (*Step, error) {
	if s.State != Running {
		return nil, s.refuse("is %s, not running", s.State)
	}
	st := s.Current()
	if st == nil || st.Spec.ID != id {
		return nil, s.refuse("step %q is not the current step (steps run in order)", clip(id))
	}
	return st, nil
}

// StartStep starts the current step id: pending, or failed with attempts
// left. It counts an attempt.
func (s *Saga) StartStep(id string) error {
	st, err := s.current(id)
	if err != nil {
		return err
	}
	switch {
	case st.State == StepPending:
	case st.State == StepFailed && st.Attempts <= st.Spec.MaxRetries:
	default:
		return s.refuse("step %s is %s after %d attempt(s) and cannot start", id, st.State, st.Attempts)
	}
	st.State = StepRunning
	st.Attempts++
	return nil
}

// StepSucceeded records that the running step id succeeded; after the last
// step the saga is succeeded.
func (s *Saga) StepSucceeded(id string) error {
	st, err := s.current(id)
	if err != nil {
		return err
	}
	if st.State != StepRunning {
		return s.refuse("step %s is %s, not running", id, st.State)
	}
	st.State = StepSucceeded
	st.Error = ""
	if s.Current() == nil {
		s.State = Succeeded
	}
	return nil
}

// StepFailed records that the running step id failed for reason. retry is
// true if the step may be started again (attempts ≤ MaxRetries); otherwise
// the saga begins compensation.
func (s *Saga) StepFailed(id, reason string) (retry bool, err error) {
	st, err := s.current(id)
	if err != nil {
		return false, err
	}
	if st.State != StepRunning {
		return false, s.refuse("step %s is %s, not running", id, st.State)
	}
	st.State = StepFailed
	st.Error = clip(reason)
	if st.Attempts <= st.Spec.MaxRetries {
		return true, nil
	}
	s.beginCompensation(fmt.Sprintf("step %s failed after %d attempt(s): %s", id, st.Attempts, st.Error))
	return false, nil
}

// StepTimedOut records that the running step id timed out, a failure.
func (s *Saga) StepTimedOut(id string) (retry bool, err error) {
	return s.StepFailed(id, "timeout")
}

// Abort sends a running saga to compensation for reason; a running step is
// marked failed without retry.
func (s *Saga) Abort(reason string) error {
	if s.State != Running {
		return s.refuse("is %s, not running", s.State)
	}
	if st := s.Current(); st != nil && st.State == StepRunning {
		st.State = StepFailed
		st.Error = clip("aborted: " + reason)
	}
	s.beginCompensation("aborted: " + reason)
	return nil
}

func (s *Saga) beginCompensation(why string) {
	s.State = Compensating
	s.Error = clip(why)
	s.finish()
}

// finish ends compensation when nothing is left to undo.
func (s *Saga) finish() {
	if _, ok := s.NextCompensation(); ok {
		return
	}
	s.State = Compensated
	for _, st := range s.Steps {
		if st.State == StepCompensationFailed {
			s.State = Failed
		}
	}
}

// NextCompensation returns the step to undo next while compensating: the
// latest step that is compensating or succeeded (§15.3: reverse order).
func (s *Saga) NextCompensation() (stepID string, ok bool) {
	if s.State != Compensating {
		return "", false
	}
	for i := len(s.Steps) - 1; i >= 0; i-- {
		if st := s.Steps[i]; st.State == StepSucceeded || st.State == StepCompensating {
			return st.Spec.ID, true
		}
	}
	return "", false
}

func (s *Saga) compensating(id string, want StepState) (*Step, error) {
	next, ok := s.NextCompensation()
	if !ok || next != id {
		return nil, s.refuse("step %q is not the next to compensate (reverse order, §15.3)", clip(id))
	}
	st := s.Step(id)
	if st.State != want {
		return nil, s.refuse("step %s is %s, not %s", id, st.State, want)
	}
	return st, nil
}

// StartCompensation starts undoing id, which MUST be NextCompensation's
// step and succeeded.
func (s *Saga) StartCompensation(id string) error {
	st, err := s.compensating(id, StepSucceeded)
	if err != nil {
		return err
	}
	st.State = StepCompensating
	return nil
}

// Compensated records that the compensation of id succeeded.
func (s *Saga) Compensated(id string) error {
	st, err := s.compensating(id, StepCompensating)
	if err != nil {
		return err
	}
	st.State = StepCompensated
	s.finish()
	return nil
}

// CompensationFailed records that the compensation of id failed; the other
// steps are still compensated, and the saga ends failed.
func (s *Saga) CompensationFailed(id string) error {
	st, err := s.compensating(id, StepCompensating)
	if err != nil {
		return err
	}
	st.State = StepCompensationFailed
	s.finish()
	return nil
}

// OwnerOf returns the agent that runs step id: the saga's agent, or the
// substitute it was handed to.
func (s *Saga) OwnerOf(id string) string {
	if st := s.Step(id); st != nil && st.Agent != "" {
		return st.Agent
	}
	return s.Agent
}

// RunningStepsOf returns the ids of the steps agent runs that are in
// flight: running, or compensating.
func (s *Saga) RunningStepsOf(agent string) []string {
	var ids []string
	for _, st := range s.Steps {
		if (st.State == StepRunning || st.State == StepCompensating) && s.OwnerOf(st.Spec.ID) == agent {
			ids = append(ids, st.Spec.ID)
		}
	}
	return ids
}

// HandOff gives the in-flight step id to agent to (§12.3 step handoff):
// from then on to reports its transitions.
func (s *Saga) HandOff(id, to string) error {
	st := s.Step(id)
	switch {
	case st == nil:
		return s.refuse("has no step %q", clip(id))
	case st.State != StepRunning && st.State != StepCompensating:
		return s.refuse("step %s is %s; only an in-flight step is handed off", id, st.State)
	case !validID(to) || to == s.OwnerOf(id):
		return s.refuse("step %s cannot be handed to %q", id, clip(to))
	}
	st.Agent = to
	return nil
}

// RetryDelay returns the linear backoff before retry number attempt (1 for
// the first retry): attempt × DefaultRetryDelay; 0 for attempt ≤ 0.
func RetryDelay(attempt int) time.Duration {
	if attempt <= 0 {
		return 0
	}
	return time.Duration(attempt) * DefaultRetryDelay
}

func clip(s string) string {
	if len(s) > MaxNameLength {
		s = s[:MaxNameLength]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// validID reports whether s matches §17.1's identifier pattern
// (ring.IsIdentifier; MaxIDLength is its bound too).
func validID(s string) bool { return ring.IsIdentifier(s) }
