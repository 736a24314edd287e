package kernel

import (
	"errors"
	"fmt"

	"github.com/annal-dev/annal/kernel/internal/errclass"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/sealstore"
)

// Error classes. Every error the kernel returns to a caller wraps one of
// them, so front ends map them to status codes with errors.Is.
var (
	// ErrUnauthenticated: no actor holds the credential presented.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the actor is known but may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrInvalid: the request is malformed or breaks a rule of the format.
	ErrInvalid = errclass.Invalid
	// ErrTooLarge: the event would not fit in one log entry.
	ErrTooLarge = errors.New("too large")
	// ErrNotFound: no such entry or actor. It matches os.ErrNotExist too,
	// without saying "file does not exist" to a caller who asked for an
	// event.
	ErrNotFound = errclass.NotFound
	// ErrNotPublished: the entry exists but no checkpoint covers it yet.
	ErrNotPublished = errors.New("not yet published")
	// ErrWitnessRefused: the entry is logged, but no checkpoint covering it
	// can be published because witnesses of the policy refuse the log's
	// checkpoints (they do not know the log, or trust another key); waiting
	// will not help until their operator fixes it.
	ErrWitnessRefused = errors.New("witnesses refuse this log's checkpoints")
	// ErrOutcomeUnknown: a write failed after the entry was handed to the
	// log; it may be in the log. Retrying could log the action twice.
	ErrOutcomeUnknown = errors.New("the entry may be in the log")
	// ErrUnavailable: the log pushes back or is shutting down; retry later.
	ErrUnavailable = logstore.ErrUnavailable
	// ErrInsufficientEnergy: the actor or an envelope cannot pay (INV-5).
	ErrInsufficientEnergy = errors.New("insufficient energy")
	// ErrRateLimited: the agent's token bucket is empty (Execution Control
	// §9.4, RateLimitExceeded); retry later.
	ErrRateLimited = errors.New("rate limit exceeded")
	// ErrConflict: the object is not in a state that allows this (a hold
	// already answered, an envelope already revoked).
	ErrConflict = errors.New("conflict")
	// ErrRetryable: nothing was written, and the same request sent again
	// is decided afresh (a decision met a state that changed under it).
	ErrRetryable = errors.New("retryable")
	// ErrStopped: the kernel has stopped taking writes until an operator
	// acts (the log is damaged, or holds an entry its rules refuse):
	// sending the request again will not help. It comes with
	// ErrUnavailable.
	ErrStopped = errors.New("stopped until an operator acts")
	// ErrErased is the answer for a sealed payload whose subject was
	// erased: its key is destroyed.
	ErrErased = sealstore.ErrErased
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
	// Policy names a broken policy that asks for the agent's end
	// (signal_on_violation), and Signal is the signal the kernel then sent
	// it ("SIGKILL"), empty if it could not.
	Policy string
	Signal string
	// Code is a reason code a specification names (an elevation's §8.3
	// reason), if any.
	Code string
	// OutcomeUnknown: the entry was handed to the log and the write
	// failed, so it may have landed (the kernel folds it if it did). Such a
	// request must not be sent again blindly.
	OutcomeUnknown bool
	// Retryable: nothing was written and the request may be sent again as
	// it is (ErrRetryable).
	Retryable bool
	// Stopped: the kernel takes no writes until an operator acts
	// (ErrStopped).
	Stopped bool
}

func (d *Denial) Error() string {
	if d.Gate != "" && d.Gate != d.Stage {
		return fmt.Sprintf("%s (%s): %s", d.Stage, d.Gate, d.Reason)
	}
	return fmt.Sprintf("%s: %s", d.Stage, d.Reason)
}

// Unwrap returns the error class, and ErrOutcomeUnknown if the write's
// outcome is unknown, or ErrRetryable if the request may be sent again.
func (d *Denial) Unwrap() []error {
	switch {
	case d.OutcomeUnknown:
		return []error{d.Class, ErrOutcomeUnknown}
	case d.Retryable:
		return []error{d.Class, ErrRetryable}
	case d.Stopped:
		return []error{d.Class, ErrStopped}
	}
	return []error{d.Class}
}

// The gates a refusal names. The rules behind them are the ledger's
// (kernel/internal/ledger): one rule per event kind, whose gates run in one
// documented order (ActionGateOrder for actions). What each gate checks, and
// in which stage it runs, is written once, in the ledger's gate table
// (kernel/internal/ledger/gates.go); Gates returns it.
const (
	GateForm       = ledger.GateForm
	GateActor      = ledger.GateActor
	GateRateLimit  = ledger.GateRateLimit
	GateAuthority  = ledger.GateAuthority
	GateBoundary   = ledger.GateBoundary
	GateEnvelope   = ledger.GateEnvelope
	GateQuarantine = ledger.GateQuarantine
	GateSession    = ledger.GateSession
	GateRing       = ledger.GateRing
	GateResources  = ledger.GateResources
	GatePolicy     = ledger.GatePolicy
	GateHold       = ledger.GateHold
	GateEnergy     = ledger.GateEnergy
	GatePayload    = ledger.GatePayload
)

// GateInfo is one gate: its name, the stage it runs in and what it checks.
type GateInfo = ledger.GateInfo

// Gates returns every gate a refusal can name, with its stage and what it
// checks, in the order of the pipeline.
func Gates() []GateInfo { return ledger.Gates() }

// ActionGateOrder is the order in which an action's gates run, after its
// form is checked where it enters: the ledger's action rule's.
var ActionGateOrder = ledger.ActionGateOrder

func denyAt(stage, gate string, class error, format string, args ...any) *Denial {
	return &Denial{Stage: stage, Gate: gate, Class: class, Reason: fmt.Sprintf(format, args...)}
}
