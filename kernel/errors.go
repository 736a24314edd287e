package kernel

import (
	"errors"
	"fmt"
	"os"
)

// Error classes. Every error the kernel returns to a caller wraps one of
// them, so front ends map them to status codes with errors.Is.
var (
	// ErrUnauthenticated: no actor holds the credential presented.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the actor is known but may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrInvalid: the request is malformed or breaks a rule of the format.
	ErrInvalid = errors.New("invalid request")
	// ErrTooLarge: the event would not fit in one log entry.
	ErrTooLarge = errors.New("too large")
	// ErrNotFound: no such entry or actor (it wraps os.ErrNotExist).
	ErrNotFound = fmt.Errorf("not found: %w", os.ErrNotExist)
	// ErrNotPublished: the entry exists but no checkpoint covers it yet.
	ErrNotPublished = errors.New("not yet published")
	// ErrUnavailable: the log pushes back or is shutting down; retry later.
	ErrUnavailable = errors.New("unavailable")
	// ErrInsufficientEnergy: the actor or an envelope cannot pay (INV-5).
	ErrInsufficientEnergy = errors.New("insufficient energy")
	// ErrRateLimited: the agent's token bucket is empty (Execution Control
	// §9.4, RateLimitExceeded); retry later.
	ErrRateLimited = errors.New("rate limit exceeded")
	// ErrConflict: the object is not in a state that allows this (a hold
	// already answered, an envelope already revoked).
	ErrConflict = errors.New("conflict")
)

// Denial is a refusal by one pipeline stage: which stage and which gate
// within it, why, and the error class. Recorded says whether an
// action.denied event went into the log, at Index.
type Denial struct {
	Stage    string
	Gate     string
	Class    error
	Reason   string
	Recorded bool
	Index    uint64
}

func (d *Denial) Error() string {
	if d.Gate != "" && d.Gate != d.Stage {
		return fmt.Sprintf("%s (%s): %s", d.Stage, d.Gate, d.Reason)
	}
	return fmt.Sprintf("%s: %s", d.Stage, d.Reason)
}

// Unwrap returns the error class.
func (d *Denial) Unwrap() error { return d.Class }

func deny(stage string, class error, format string, args ...any) *Denial {
	return &Denial{Stage: stage, Class: class, Reason: fmt.Sprintf(format, args...)}
}

// The gates inside the validate stage, in the order they run.
const (
	GateActor     = "actor"     // the actor exists, is active and not expired
	GateForm      = "form"      // type, target and payload are well formed
	GateBoundary  = "boundary"  // (target, type) ∈ W(actor); system/ and ledger/ are root's (Def. 4.11–4.12)
	GateEnvelope  = "envelope"  // an agent's state-changing action is within a live envelope (Def. 4.13)
	GateHold      = "hold"      // a hold rule matches: the action waits for a human (Def. 4.20)
	GateEnergy    = "energy"    // the actor and every envelope of the chain can pay (INV-5)
	GatePayload   = "payload"   // execute payloads carry §5.6's fields
	GateAuthority = "authority" // who may create actors, issue envelopes, answer holds
)

func denyAt(stage, gate string, class error, format string, args ...any) *Denial {
	return &Denial{Stage: stage, Gate: gate, Class: class, Reason: fmt.Sprintf(format, args...)}
}
