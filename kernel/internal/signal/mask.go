package signal

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Mask is a set of maskable signals: bit s for signal s.
type Mask uint16

// maskable is the bits a Mask may have.
const maskable = Mask(1<<SIGSTOP | 1<<SIGCONT | 1<<SIGINT | 1<<SIGTERM)

// Valid reports whether m holds only maskable signals.
func (m Mask) Valid() bool { return m&^maskable == 0 }

// With returns m with s added. It refuses a signal that is not maskable.
func (m Mask) With(s Signal) (Mask, error) {
	if !s.Maskable() {
		return m, fmt.Errorf("%w: %s cannot be masked", ErrInvalid, s)
	}
	return m | 1<<s, nil
}

// Has reports whether m holds s; never for a signal that is not maskable.
func (m Mask) Has(s Signal) bool {
	return s.Maskable() && m&(1<<s) != 0
}

// Signals returns the signals of m, by value.
func (m Mask) Signals() []Signal {
	var out []Signal
	for _, s := range All() {
		if m.Has(s) {
			out = append(out, s)
		}
	}
	return out
}

// MarshalJSON writes the names of m's signals, sorted by name. It refuses a
// mask with a bit that is not a maskable signal.
func (m Mask) MarshalJSON() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%w: mask %#04x has bits that are not maskable signals", ErrInvalid, uint16(m))
	}
	list := []string{}
	for _, s := range m.Signals() {
		list = append(list, s.String())
	}
	slices.Sort(list)
	return json.Marshal(list)
}

// UnmarshalJSON reads an array of canonical names (see the package
// comment). On error m is left as it was.
func (m *Mask) UnmarshalJSON(data []byte) error {
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("%w: mask is not an array of names: %v", ErrInvalid, err)
	}
	if list == nil {
		return fmt.Errorf("%w: mask is null; the empty mask is []", ErrInvalid)
	}
	var out Mask
	for i, name := range list {
		var s Signal
		if err := s.UnmarshalText([]byte(name)); err != nil {
			return fmt.Errorf("mask entry %d: %w", i+1, err)
		}
		if out.Has(s) {
			return fmt.Errorf("%w: mask entry %d: %s given twice", ErrInvalid, i+1, s)
		}
		next, err := out.With(s)
		if err != nil {
			return fmt.Errorf("mask entry %d: %w", i+1, err)
		}
		out = next
	}
	*m = out
	return nil
}
