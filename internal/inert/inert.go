// Package inert makes text that someone else wrote (an agent's target, a
// name, a reason) safe to show a person: control characters, which a
// terminal may run as escape sequences, and the bidirectional overrides
// that make text read other than it is, are shown as \uXXXX escapes,
// never passed through. Everything else is kept as it is.
package inert

import (
	"fmt"
	"strings"
)

// Text returns s with every C0 and C1 control character (newlines too),
// DEL and bidirectional control (U+061C, U+200E, U+200F, U+202A–U+202E,
// U+2066–U+2069) written as \uXXXX.
func Text(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0),
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e || r == 0x200f || r == 0x061c:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
