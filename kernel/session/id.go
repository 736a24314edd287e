package session

import "github.com/annal-dev/annal/kernel/ring"

// MaxIDLength is the longest agent or session identifier (§17.1).
const MaxIDLength = ring.MaxIdentifierLen

// validID reports whether s is an identifier of §17.1 (ring.IsIdentifier).
// The kernel validates identifiers before they get here; checking again
// keeps the package fail-closed on its own.
func validID(s string) bool { return ring.IsIdentifier(s) }
