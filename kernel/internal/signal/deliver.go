package signal

import (
	"errors"
	"fmt"
)

// AgentState is an agent's run state as far as signals go.
type AgentState string

// The states.
const (
	Running    AgentState = "running"
	Stopped    AgentState = "stopped"
	Terminated AgentState = "terminated"
)

// Valid reports whether st is one of the states.
func (st AgentState) Valid() bool {
	return st == Running || st == Stopped || st == Terminated
}

// Effect is what the kernel does when it delivers a signal.
type Effect string

// The effects.
const (
	// EffectStop pauses the agent: the kernel admits none of its actions
	// until it continues.
	EffectStop Effect = "stop"
	// EffectContinue resumes a stopped agent.
	EffectContinue Effect = "continue"
	// EffectTerminate ends the agent for good.
	EffectTerminate Effect = "terminate"
	// EffectQueue hands the signal to the agent's own handler; the kernel's
	// state of the agent does not change.
	EffectQueue Effect = "queue"
	// EffectNone: the signal changes nothing (SIGSTOP to a stopped agent,
	// SIGCONT to a running one).
	EffectNone Effect = "none"
)

// ErrTerminated is returned for a signal sent to a terminated agent.
var ErrTerminated = errors.New("agent is terminated")

// Deliver applies the delivery rules of the package comment: the effect of
// sending s to an agent in state st with mask m, and its state afterwards.
// On error it returns ("", st, err).
func Deliver(st AgentState, m Mask, s Signal) (Effect, AgentState, error) {
	switch {
	case !st.Valid():
		return "", st, fmt.Errorf("%w: agent state %q is not running, stopped or terminated", ErrInvalid, st)
	case !s.Valid():
		return "", st, fmt.Errorf("%w: %s is not a signal", ErrInvalid, s)
	case !m.Valid():
		return "", st, fmt.Errorf("%w: mask %#04x has bits that are not maskable signals", ErrInvalid, uint16(m))
	case st == Terminated:
		return "", st, fmt.Errorf("%s: %w and takes no signal", s, ErrTerminated)
	case !s.Maskable():
		return EffectTerminate, Terminated, nil
	case m.Has(s):
		return EffectQueue, st, nil
	}
	switch s {
	case SIGSTOP:
		if st == Stopped {
			return EffectNone, st, nil
		}
		return EffectStop, Stopped, nil
	case SIGCONT:
		if st == Running {
			return EffectNone, st, nil
		}
		return EffectContinue, Running, nil
	case SIGINT:
		return EffectQueue, st, nil
	default: // SIGTERM, the only other maskable signal.
		return EffectTerminate, Terminated, nil
	}
}
