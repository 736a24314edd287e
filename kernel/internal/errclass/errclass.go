// Package errclass holds the error classes that the kernel's inner
// packages return and the kernel re-exports (kernel.ErrInvalid is
// errclass.Invalid, and so on), the way io/fs defines the errors os
// re-exports: front ends match them with errors.Is, whichever layer
// wrapped them.
package errclass

import (
	"errors"
	"os"
)

// Invalid: the request is malformed or breaks a rule of the format.
var Invalid = errors.New("invalid request")

// NotFound: no such entry or actor. It matches os.ErrNotExist too, without
// saying "file does not exist" to a caller who asked for an event.
var NotFound error = notFound{}

type notFound struct{}

func (notFound) Error() string        { return "not found" }
func (notFound) Is(target error) bool { return target == os.ErrNotExist }
