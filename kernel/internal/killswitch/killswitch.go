// Package killswitch implements the kill switch of Agent Hypervisor
// Execution Control 1.0 §12 for the Annal kernel: emergency termination of
// an agent, with in-flight steps handed to the session's substitute first.
//
// Kill MUST always return a Result (§12.6): no registered callback, a
// callback that times out, returns an error or panics all give
// Terminated false with the failure in Details, never a lost result. The
// kernel logs the Result as an event; on replay it folds the logged Result
// and does not call Kill again, so Kill is the one live-only, clock-bound
// operation here (its callback timeout). The kill time is an argument.
//
// Handoff (§12.3): if a substitute is registered for the session and it is
// not the agent being killed, every in-flight step is handed to it through
// the handoff function; a step whose handoff fails (an error, a panic, or no
// handoff function) is marked for compensation. Without a substitute every
// in-flight step is marked for compensation. CompensationTriggered is true
// iff at least one step was so marked.
//
// Cleanup (§12.7): Kill removes the agent's callback and the session's
// substitute registration when it starts, so a second concurrent Kill of
// the same agent finds no callback and the callback is called at most once
// per registration. The killed agent is also removed as the substitute of
// any other session.
//
// A Switch is safe for concurrent use.
package killswitch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Reason is why an agent is killed (§12.2).
type Reason string

// The kill reasons of §12.2.
const (
	BehavioralDrift   Reason = "behavioral_drift"
	RateLimit         Reason = "rate_limit"
	RingBreach        Reason = "ring_breach"
	Manual            Reason = "manual"
	QuarantineTimeout Reason = "quarantine_timeout"
	SessionTimeout    Reason = "session_timeout"
)

// Valid reports whether r is one of the six reasons of §12.2.
func (r Reason) Valid() bool {
	switch r {
	case BehavioralDrift, RateLimit, RingBreach, Manual, QuarantineTimeout, SessionTimeout:
		return true
	}
	return false
}

// Reasons lists the kill reasons of §12.2.
func Reasons() []string {
	return []string{string(BehavioralDrift), string(RateLimit), string(RingBreach), string(Manual), string(QuarantineTimeout), string(SessionTimeout)}
}

// DefaultCallbackTimeout is the termination callback timeout (§12.5).
const DefaultCallbackTimeout = 5 * time.Second

// Handoff statuses.
const (
	StatusHandedOff    = "handed_off"
	StatusCompensation = "compensation"
)

// Handoff records what became of one in-flight step (§12.3). To is the
// substitute, "" when there was none.
type Handoff struct {
	StepID string `json:"step_id"`
	From   string `json:"from_agent"`
	To     string `json:"to_agent"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// Result is a kill result (§12.4). Timestamp is RFC 3339 with nanoseconds,
// in UTC. Handoffs is never nil and is in the order of the in-flight steps.
type Result struct {
	KillID                string    `json:"kill_id"`
	AgentDID              string    `json:"agent_did"`
	SessionID             string    `json:"session_id"`
	Reason                Reason    `json:"reason"`
	Timestamp             string    `json:"timestamp"`
	Handoffs              []Handoff `json:"handoffs"`
	HandoffSuccessCount   int       `json:"handoff_success_count"`
	CompensationTriggered bool      `json:"compensation_triggered"`
	Terminated            bool      `json:"terminated"`
	Details               string    `json:"details"`
}

// Callback terminates agent. It MUST honour ctx, which carries the callback
// timeout; a nil error means the agent is terminated.
type Callback func(ctx context.Context, agent, session string, reason Reason) error

// Switch holds termination callbacks and substitutes.
type Switch struct {
	timeout time.Duration

	mu   sync.Mutex
	cbs  map[string]Callback // by agent
	subs map[string]string   // session → substitute agent
}

// New returns a Switch whose callbacks time out after timeout (0 or less
// means DefaultCallbackTimeout).
func New(timeout time.Duration) *Switch {
	if timeout <= 0 {
		timeout = DefaultCallbackTimeout
	}
	return &Switch{timeout: timeout, cbs: map[string]Callback{}, subs: map[string]string{}}
}

// Register sets agent's termination callback, replacing any previous one.
// A nil cb unregisters the agent.
func (s *Switch) Register(agent string, cb Callback) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cb == nil {
		delete(s.cbs, agent)
		return
	}
	s.cbs[agent] = cb
}

// RegisterSubstitute sets the substitute of session (§12.3); "" removes it.
func (s *Switch) RegisterSubstitute(session, agent string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if agent == "" {
		delete(s.subs, session)
		return
	}
	s.subs[session] = agent
}

// take removes and returns agent's callback and session's substitute, and
// removes agent as the substitute of every session (§12.7).
func (s *Switch) take(agent, session string) (Callback, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cb := s.cbs[agent]
	delete(s.cbs, agent)
	sub := s.subs[session]
	delete(s.subs, session)
	for k, v := range s.subs {
		if v == agent {
			delete(s.subs, k)
		}
	}
	return cb, sub
}

// Kill kills agent in session for reason and returns the result; see the
// package comment. inFlight lists the agent's in-flight step ids; handoff
// hands one step to a substitute. now is the kill time recorded in the
// result. Kill blocks at most the callback timeout plus the time handoff
// takes.
func (s *Switch) Kill(ctx context.Context, killID, agent, session string, reason Reason, inFlight []string, handoff func(step, to string) error, now time.Time) Result {
	res := Result{
		KillID:    killID,
		AgentDID:  agent,
		SessionID: session,
		Reason:    reason,
		Timestamp: now.UTC().Format(time.RFC3339Nano),
		Handoffs:  []Handoff{},
	}
	var details []string
	if !reason.Valid() {
		// A label never blocks stopping an agent; it is recorded instead.
		details = append(details, fmt.Sprintf("unknown kill reason %q", reason))
	}
	cb, sub := s.take(agent, session)
	if sub == agent {
		details = append(details, "the session's substitute is the killed agent; not handing off to it")
		sub = ""
	}
	for _, step := range inFlight {
		h := Handoff{StepID: step, From: agent, To: sub, Status: StatusCompensation}
		switch {
		case sub == "":
		case handoff == nil:
			h.Error = "no handoff function"
		default:
			if err := safeHandoff(handoff, step, sub); err != nil {
				h.Error = err.Error()
			} else {
				h.Status = StatusHandedOff
				res.HandoffSuccessCount++
			}
		}
		if h.Status == StatusCompensation {
			res.CompensationTriggered = true
		}
		res.Handoffs = append(res.Handoffs, h)
	}
	if len(inFlight) > 0 {
		if sub == "" {
			details = append(details, fmt.Sprintf("no substitute for session %q: %d step(s) marked for compensation", session, len(inFlight)))
		} else {
			details = append(details, fmt.Sprintf("%d of %d step(s) handed off to %q", res.HandoffSuccessCount, len(inFlight), sub))
		}
	}
	if cb == nil {
		details = append(details, fmt.Sprintf("no termination callback registered for agent %q: not terminated", agent))
	} else if err := s.call(ctx, cb, agent, session, reason); err != nil {
		details = append(details, "termination callback failed: "+err.Error())
	} else {
		res.Terminated = true
		details = append(details, "terminated")
	}
	res.Details = strings.Join(details, "; ")
	return res
}

// ErrTimeout is wrapped by a callback failure due to the timeout.
var ErrTimeout = errors.New("timeout")

// ErrPanic is wrapped by a callback or handoff failure due to a panic.
var ErrPanic = errors.New("panic")

// call runs cb with the timeout, converting a panic into an error. A
// callback that ignores its context is abandoned at the timeout; its later
// return is discarded.
func (s *Switch) call(ctx context.Context, cb Callback, agent, session string, reason Reason) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("%w: %v", ErrPanic, p)
			}
		}()
		done <- cb(cctx, agent, session, reason)
	}()
	select {
	case err := <-done:
		if err != nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w after %v: %v", ErrTimeout, s.timeout, err)
		}
		return err
	case <-cctx.Done():
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w after %v", ErrTimeout, s.timeout)
		}
		return fmt.Errorf("cancelled: %w", cctx.Err())
	}
}

func safeHandoff(handoff func(step, to string) error, step, to string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, p)
		}
	}()
	return handoff(step, to)
}
