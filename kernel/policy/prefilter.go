package policy

import (
	"bytes"
	"regexp/syntax"
	"unicode/utf8"
)

// A blocked pattern's prefilter: the literal strings one of which every
// match of the pattern contains (requiredLiterals). A payload that holds
// none of them, compared without case, cannot match, and the regular
// expression is not run on it. Why: Go's regexp has no shortcut for a
// case-insensitive pattern and tries it at every byte of the payload —
// no_pii's four patterns took about 80 µs on 1 KiB, strict's 37 µs
// (BenchmarkCheck), on each check of every action under the policy — while
// most payloads hold none of the words, which a few substring searches
// show.
//
// Only ASCII payloads are prefiltered. Under (?i) some non-ASCII runes fold
// to ASCII letters (U+017F ſ to s, U+212A K to k), which an ASCII
// comparison would miss; a payload with any byte of 0x80 or more goes to
// the regular expression whatever its literals.

// maxRequiredLiterals bounds the literals of one pattern: past it the
// searches would cost what the regular expression costs.
const maxRequiredLiterals = 16

// requiredLiterals returns lower-case ASCII strings one of which every
// match of re contains, or nil when it cannot tell (then the regular
// expression always runs). It errs only towards nil: a node it does not
// know requires nothing.
func requiredLiterals(re *syntax.Regexp) [][]byte {
	switch re.Op {
	case syntax.OpLiteral:
		return literalOf(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min < 1 {
			return nil
		}
		return requiredLiterals(re.Sub[0])
	case syntax.OpConcat:
		return mostSelective(re.Sub)
	case syntax.OpAlternate:
		return anyOf(re.Sub)
	default:
		return nil
	}
}

// literalOf is the lower-case ASCII literal of runes, or nil when it is
// empty or not ASCII.
func literalOf(runes []rune) [][]byte {
	if len(runes) == 0 {
		return nil
	}
	lit := make([]byte, 0, len(runes))
	for _, r := range runes {
		if r >= utf8.RuneSelf {
			return nil
		}
		lit = append(lit, lowerASCII(byte(r)))
	}
	return [][]byte{lit}
}

// mostSelective is what a concatenation of parts requires: each part's
// literals are required of the whole, and the most selective part is
// kept, the one with the longest shortest literal.
func mostSelective(parts []*syntax.Regexp) [][]byte {
	var best [][]byte
	for _, sub := range parts {
		if lits := requiredLiterals(sub); lits != nil && (best == nil || shortest(lits) > shortest(best)) {
			best = lits
		}
	}
	return best
}

// anyOf is what an alternation of branches requires: one of the literals
// of any branch, or nothing when one branch requires nothing or the
// literals are too many.
func anyOf(branches []*syntax.Regexp) [][]byte {
	var all [][]byte
	for _, sub := range branches {
		lits := requiredLiterals(sub)
		if lits == nil {
			return nil // that branch requires nothing
		}
		all = append(all, lits...)
	}
	if len(all) > maxRequiredLiterals {
		return nil
	}
	return all
}

func shortest(lits [][]byte) int {
	n := len(lits[0])
	for _, l := range lits[1:] {
		n = min(n, len(l))
	}
	return n
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// foldedPayload is a payload lower-cased once, on first use, for the
// prefilters of every policy an action is checked against.
type foldedPayload struct {
	payload []byte
	done    bool
	lower   []byte // nil: the payload is not ASCII
}

func (f *foldedPayload) get() []byte {
	if !f.done {
		f.done = true
		lower := make([]byte, len(f.payload))
		for i, c := range f.payload {
			if c >= utf8.RuneSelf {
				return nil
			}
			lower[i] = lowerASCII(c)
		}
		f.lower = lower
	}
	return f.lower
}

// mayMatch reports whether a pattern whose required literals are lits can
// match the payload: false only when the payload is ASCII and holds none
// of them, without regard to case.
func (f *foldedPayload) mayMatch(lits [][]byte) bool {
	if lits == nil {
		return true
	}
	lower := f.get()
	if lower == nil {
		return true
	}
	for _, lit := range lits {
		if bytes.Contains(lower, lit) {
			return true
		}
	}
	return false
}
