package verifier

import "fmt"

// Check names one step of a verification, in the order the steps run.
type Check string

// The checks, each named in the error of the step that failed.
const (
	CheckKey         Check = "verifier key"
	CheckFormat      Check = "proof format"
	CheckCheckpoint  Check = "checkpoint signature"
	CheckIndex       Check = "index"
	CheckEntry       Check = "entry"
	CheckInclusion   Check = "inclusion"
	CheckConsistency Check = "consistency"
)

// Error is a failed verification: which check failed and why.
type Error struct {
	Check Check
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Check, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

func fail(c Check, format string, args ...any) *Error {
	return &Error{Check: c, Err: fmt.Errorf(format, args...)}
}

func wrap(c Check, err error) *Error { return &Error{Check: c, Err: err} }
