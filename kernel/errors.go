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
)

// Denial is a refusal by one pipeline stage: which stage, why, and the
// error class.
type Denial struct {
	Stage  string
	Class  error
	Reason string
}

func (d *Denial) Error() string { return fmt.Sprintf("%s: %s", d.Stage, d.Reason) }

// Unwrap returns the error class.
func (d *Denial) Unwrap() error { return d.Class }

func deny(stage string, class error, format string, args ...any) *Denial {
	return &Denial{Stage: stage, Class: class, Reason: fmt.Sprintf(format, args...)}
}
