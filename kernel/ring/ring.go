package ring

import (
	"errors"
	"fmt"
)

// ErrInvalidValue is wrapped by every error about a value outside what the
// specification allows: a ring outside 0..3, a score outside [0, 1], an
// identifier that does not match its pattern, a window out of range. It is
// the specification's ValueError (§17.3).
var ErrInvalidValue = errors.New("invalid value")

// ErrTypeMismatch is wrapped by every error about a JSON value of the wrong
// type, such as a string where a boolean belongs. It is the specification's
// TypeError (§17.3).
var ErrTypeMismatch = errors.New("type mismatch")

// Ring is an execution ring (§3.1). Lower values are more privileged (§3.2).
// Only the four constants below are valid; any other value is refused by
// ParseRing and treated as the least privileged by every decision.
type Ring int

// The four execution rings (§3.1).
const (
	// Root is hypervisor configuration and penalty. It is never assigned by
	// score, never granted by elevation and never allowed by Check: it
	// requires out-of-band SRE Witness attestation (§20.1).
	Root Ring = 0
	// Privileged is for non-reversible actions, with full resource access.
	Privileged Ring = 1
	// Standard is for reversible actions, with scoped resource access.
	Standard Ring = 2
	// Sandbox is for read-only actions, with minimal resource access.
	Sandbox Ring = 3
)

// Default is the ring of an agent without a computed ring assignment (§3.3).
const Default = Sandbox

// Valid reports whether r is one of the four rings (exactly 0..3).
func (r Ring) Valid() bool { return r >= Root && r <= Sandbox }

// String returns a form such as "ring 1 (privileged)"; a value outside 0..3
// is written "ring 7 (invalid)".
func (r Ring) String() string {
	names := [...]string{"root", "privileged", "standard", "sandbox"}
	if !r.Valid() {
		return fmt.Sprintf("ring %d (invalid)", int(r))
	}
	return fmt.Sprintf("ring %d (%s)", int(r), names[r])
}

// MorePrivilegedThan reports whether r is strictly more privileged than o,
// that is whether r's value is lower (§3.2). It reports false when either
// ring is invalid, so an invalid ring never wins a comparison.
func (r Ring) MorePrivilegedThan(o Ring) bool {
	return r.Valid() && o.Valid() && r < o
}

// ParseRing returns the ring with value v, or an error wrapping
// ErrInvalidValue when v is not exactly 0, 1, 2 or 3.
func ParseRing(v int) (Ring, error) {
	r := Ring(v)
	if !r.Valid() {
		return Default, fmt.Errorf("ring %d: %w: an execution ring is exactly 0, 1, 2 or 3 (§3.1)", v, ErrInvalidValue)
	}
	return r, nil
}
