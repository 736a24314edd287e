package signal

import (
	"errors"
	"fmt"
	"strings"
)

// Signal is an Agent OS signal.
type Signal int

// The signals, with the seed's values.
const (
	SIGSTOP   Signal = 1
	SIGCONT   Signal = 2
	SIGINT    Signal = 3
	SIGKILL   Signal = 4
	SIGTERM   Signal = 5
	SIGPOLICY Signal = 8
	SIGTRUST  Signal = 9
)

// ErrInvalid is wrapped by every error about an unknown signal, a malformed
// mask or a signal that cannot be masked.
var ErrInvalid = errors.New("invalid signal")

var names = map[Signal]string{
	SIGSTOP: "SIGSTOP", SIGCONT: "SIGCONT", SIGINT: "SIGINT", SIGKILL: "SIGKILL",
	SIGTERM: "SIGTERM", SIGPOLICY: "SIGPOLICY", SIGTRUST: "SIGTRUST",
}

// All returns every signal, by value.
func All() []Signal {
	return []Signal{SIGSTOP, SIGCONT, SIGINT, SIGKILL, SIGTERM, SIGPOLICY, SIGTRUST}
}

// Valid reports whether s is one of the signals.
func (s Signal) Valid() bool {
	_, ok := names[s]
	return ok
}

// String returns the canonical name ("SIGSTOP"), or "Signal(n)" for a value
// that is not a signal.
func (s Signal) String() string {
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("Signal(%d)", int(s))
}

// Maskable reports whether an agent may handle s itself: SIGKILL, SIGPOLICY
// and SIGTRUST are not, nor is a value that is not a signal.
func (s Signal) Maskable() bool {
	switch s {
	case SIGSTOP, SIGCONT, SIGINT, SIGTERM:
		return true
	}
	return false
}

// Parse returns the signal named name: "SIGSTOP" or "STOP", in any case.
func Parse(name string) (Signal, error) {
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			// Only ASCII folds: "ſtop" (U+017F) upper-cases to "STOP".
			return 0, fmt.Errorf("%w: %q is not a signal name (not ASCII)", ErrInvalid, name)
		}
	}
	upper := strings.ToUpper(name)
	if !strings.HasPrefix(upper, "SIG") {
		upper = "SIG" + upper
	}
	for s, n := range names {
		if n == upper {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: %q is not a signal name (SIGSTOP, SIGCONT, SIGINT, SIGKILL, SIGTERM, SIGPOLICY, SIGTRUST, with or without SIG, any case)", ErrInvalid, name)
}

// MarshalText writes the canonical name; it refuses a value that is not a
// signal.
func (s Signal) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrInvalid, int(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads only the canonical name, as MarshalText writes it.
func (s *Signal) UnmarshalText(b []byte) error {
	for v, n := range names {
		if n == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("%w: %q is not a canonical signal name", ErrInvalid, b)
}
