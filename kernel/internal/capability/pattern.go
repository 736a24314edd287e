package capability

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/annal-dev/annal/kernel/event"
)

// maxPatternSize is the longest pattern in bytes: as long as the longest
// target.
const maxPatternSize = event.MaxTargetSize

// maxPatternSegments bounds the segments of a pattern. The matcher keeps one
// bit per pattern position (maxPatternSegments+1 of them) in a uint64.
const maxPatternSegments = 32

// anySegments is the segment that matches zero or more whole segments.
const anySegments = "**"

// errInvalidPattern is wrapped by every error ParsePattern returns.
var errInvalidPattern = errors.New("invalid capability pattern")

// Pattern is a parsed capability pattern. It is immutable, so copies share
// it safely across goroutines. The zero Pattern is not a pattern: it matches
// nothing, covers nothing and is covered by nothing.
//
// A pattern is run as a nondeterministic automaton whose states are the
// positions 0..n between its n segments: position i means "segments before i
// are matched". The state sets are bit masks.
type Pattern struct {
	text string
	segs []segment
	// anyDepth has bit i set when segment i is "**": position i stays active
	// on any segment, and also activates position i+1 without reading one.
	anyDepth uint64
	// anySegment has bit i set when segment i is the glob "*", which matches
	// every segment.
	anySegment uint64
	// universal has bit i set, for i < n, when segments i..n-1 are all "**":
	// from there every continuation matches.
	universal uint64
}

type segment struct {
	// glob is the segment as written; for "**" it is "**".
	glob string
	// anyDepth marks "**".
	anyDepth bool
}

// ParsePattern parses a capability pattern; see the package comment for the
// syntax.
func ParsePattern(s string) (Pattern, error) {
	bad := func(format string, args ...any) (Pattern, error) {
		return Pattern{}, fmt.Errorf("%w %q: %s", errInvalidPattern, s, fmt.Sprintf(format, args...))
	}
	if err := checkPatternText(s); err != nil {
		return bad("%v", err)
	}
	p := Pattern{text: s}
	for i, seg := range strings.Split(s, "/") {
		switch {
		case seg == "":
			return bad("empty path segment")
		case seg == "." || seg == "..":
			return bad("a %q segment (targets never have one)", seg)
		case seg == anySegments:
			p.anyDepth |= 1 << i
		case strings.Contains(seg, "**"):
			return bad("segment %q: ** must be a whole segment, and * stays within one segment", seg)
		case seg == "*":
			p.anySegment |= 1 << i
		}
		p.segs = append(p.segs, segment{glob: seg, anyDepth: seg == anySegments})
	}
	for i := len(p.segs) - 1; i >= 0 && p.segs[i].anyDepth; i-- {
		p.universal |= 1 << i
	}
	return p, nil
}

// checkPatternText refuses what is wrong with a pattern before its
// segments are read: empty, too long, not UTF-8, a control character or
// backslash, too many segments.
func checkPatternText(s string) error {
	switch {
	case s == "":
		return errors.New("the pattern is empty")
	case len(s) > maxPatternSize:
		return fmt.Errorf("%d bytes, more than %d", len(s), maxPatternSize)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return errors.New("contains a control character or backslash")
		}
	}
	if n := strings.Count(s, "/") + 1; n > maxPatternSegments {
		return fmt.Errorf("%d segments, more than %d", n, maxPatternSegments)
	}
	return nil
}

// String returns the pattern as it was written (the only spelling
// ParsePattern accepts).
func (p Pattern) String() string { return p.text }

// isZero reports whether p is the zero Pattern.
func (p Pattern) isZero() bool { return len(p.segs) == 0 }

// Match reports whether p matches target. It is false for every target that
// event.ValidateTarget refuses, and for the zero Pattern.
func (p Pattern) Match(target string) bool {
	return event.ValidateTarget(target) == nil && p.MatchValidTarget(target)
}

// MatchValidTarget is Match for a target the caller has already checked
// with event.ValidateTarget, so that matching one target against several
// grants validates it once. On any other target its answer means nothing.
func (p Pattern) MatchValidTarget(target string) bool {
	if p.isZero() {
		return false
	}
	accept := uint64(1) << len(p.segs)
	state := p.start()
	for rest := target; ; {
		if state&p.universal != 0 {
			// The remaining segments are all "**"; the rest of a valid target
			// is matched whatever it is.
			return true
		}
		seg, tail, more := strings.Cut(rest, "/")
		state = p.advance(state, p.globsMatching(state, seg))
		if state == 0 {
			return false
		}
		if !more {
			return state&accept != 0
		}
		rest = tail
	}
}

// start is the state before reading any segment.
func (p *Pattern) start() uint64 { return p.closure(1) }

// closure adds the positions reachable by letting a "**" match zero
// segments. Ascending order carries a run of "**" through in one pass.
func (p *Pattern) closure(state uint64) uint64 {
	if state&p.anyDepth == 0 {
		return state
	}
	for i := range p.segs {
		if state&p.anyDepth&(1<<i) != 0 {
			state |= 1 << (i + 1)
		}
	}
	return state
}

// advance reads one segment: matched holds the glob positions whose glob
// matches it. A "**" position stays; a matching glob moves on by one.
func (p *Pattern) advance(state, matched uint64) uint64 {
	return p.closure(state&p.anyDepth | (state&matched&^p.anyDepth)<<1)
}

// globsMatching returns the active glob positions whose glob matches seg.
// Only active positions are tried, so each target segment costs at most one
// glob match per pattern segment.
func (p *Pattern) globsMatching(state uint64, seg string) uint64 {
	var matched uint64
	active := state &^ p.anyDepth &^ (uint64(1) << len(p.segs))
	for ; active != 0; active &= active - 1 {
		i := bits.TrailingZeros64(active)
		if p.anySegment&(1<<i) != 0 || matchGlob(p.segs[i].glob, seg) {
			matched |= 1 << i
		}
	}
	return matched
}

// matchGlob reports whether the segment glob matches s, where '*' in glob
// matches any run of bytes and every other byte matches itself. Only the
// last '*' seen is ever backtracked to, so the cost is at most
// len(glob)·len(s), never exponential: a later '*' can absorb anything an
// earlier one would have. On valid UTF-8 a '*' never splits a rune: the
// glob byte after a '*' starts a rune, so it only equals a byte of s that
// starts one too.
//
// decideCover calls it with a child glob as s: a '*' in s is then a character no
// literal of glob can match, which is exactly what makes it a witness.
func matchGlob(glob, s string) bool {
	gi, si := 0, 0
	starGi, starSi := -1, 0
	for si < len(s) {
		switch {
		case gi < len(glob) && glob[gi] == '*':
			starGi, starSi = gi, si
			gi++
		case gi < len(glob) && glob[gi] == s[si]:
			gi++
			si++
		case starGi >= 0:
			// Let the last '*' absorb one more byte and retry from there.
			starSi++
			gi, si = starGi+1, starSi
		default:
			return false
		}
	}
	for gi < len(glob) && glob[gi] == '*' {
		gi++
	}
	return gi == len(glob)
}
