package capability

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/annal-dev/annal/kernel/event"
)

// maxCoverStates bounds the search decideCover makes for one pair of
// patterns. Past it, the pair counts as not covered, without deciding. It is
// part of the contract, like the pattern syntax: a kernel that replays the
// log MUST decide delegations with the same bound as the kernel that wrote
// it. Patterns people write stay far below it (a few dozen states); only
// patterns built to make inclusion hard, for instance many "**" in the child
// against a long run of "*" after a literal in the parent, reach it.
const maxCoverStates = 1 << 12

// maxSetCoverStates bounds the search states Set.CheckCovers spends on all
// the pairs of grants it decides together; past it, it refuses. A full set of
// maxGrants ordinary grants against another needs about 20,000. With both
// bounds a delegation is decided in tens of milliseconds at worst, whatever
// the patterns.
const maxSetCoverStates = 1 << 18

// counterexample returns a target that child matches and parent does not,
// for error messages; the search tries the shortest shapes of child first,
// so it is usually short. ok is false when parent covers child, and also
// when the search found no counterexample to show (it reached
// maxCoverStates, or the one it found is longer than a target may be).
func counterexample(parent, child Pattern) (target string, ok bool) {
	r := decideCover(parent, child, maxCoverStates)
	if r.uncovered == nil {
		return "", false
	}
	fresh := string(freshRune(parent.text))
	target = strings.ReplaceAll(strings.Join(r.uncovered, "/"), "*", fresh)
	if event.ValidateTarget(target) != nil {
		return "", false
	}
	return target, true
}

// coverState is a node of the search: child segments read so far, the
// parent's state set, and whether the path read so far is non-empty.
type coverState struct {
	childPos int
	parent   uint64
	nonEmpty bool
}

// coverResult is what decideCover found: covered, an uncovered path
// (segments written with '*' for the fresh character), or neither, because
// a pattern is zero or the search gave up.
type coverResult struct {
	covered   bool
	uncovered []string
	gaveUp    bool
	states    int // search states reached
}

// decideCover decides whether parent matches every target that child
// matches (language inclusion), reaching at most limit search states. It is
// sound: covered only if inclusion holds. It is exact: not covered only if
// some path matches child and not parent (uncovered holds one), or if the
// search reached limit (gaveUp). The empty path is not a target and is
// ignored, so "*/**" covers "**". The 1024-byte limit on targets is
// ignored: a child whose only uncovered paths are longer than that is
// refused, which errs on the safe side.
//
// How it decides. Call the most general instance of a child glob the glob
// with each '*' replaced by one character that appears nowhere in parent (the
// code uses '*' itself, which no literal can be; counterexample picks a real
// one). A parent glob g matches that instance if and only if g matches every
// instance of the child glob. If: the literal runs of g do not contain the
// fresh character, so where g matches the most general instance each of them
// lies inside one literal run of the child glob, and stays in place in order
// whatever the child's '*'s are replaced with. Only if: the most general
// instance is an instance. (This is the classical inclusion test for globs
// whose only wildcard matches any run: a child '*' can only be absorbed by a
// parent '*'.) Likewise the fresh character alone is the most general
// segment a child "**" can produce: it matches only the parent glob "*",
// which every segment matches.
//
// The parent automaton (see Pattern) is monotone: a segment that matches
// more of the parent's globs leads to a superset of states, and a superset
// accepts whenever the subset does. So among all paths of one shape (each
// child "**" producing some number k of segments, each child glob one
// segment), the one made of most general instances is the hardest for the
// parent: if the parent matches it, it matches them all, and if it does not,
// that path is a counterexample. decideCover therefore runs the parent's subset
// automaton over every shape of the child: a depth-first search over
// (child position, parent state set, whether a segment was read), where a
// child "**" either ends or produces one more most general segment. There
// are finitely many such states and none is explored twice, so the search
// ends; it finds an uncovered shape if and only if inclusion fails.
//
// Why a bound. Inclusion for patterns with "**", "*" and literals is hard in
// general: a parent such as "**/a/*/*/*" must remember which of the last few
// segments were "a", and a child with many "**" can make it remember many
// combinations. The number of search states is what grows; limit caps it,
// and a capped search does not cover.
func decideCover(parent, child Pattern, limit int) coverResult {
	if parent.isZero() || child.isZero() {
		return coverResult{}
	}
	if parent.text == child.text {
		return coverResult{covered: true} // one spelling, one language
	}
	// matched[j] is the parent glob positions that match the most general
	// instance of child segment j; a child "**" produces the segment "*".
	matched := make([]uint64, len(child.segs))
	for j, c := range child.segs {
		if c.anyDepth {
			matched[j] = parent.anySegment
			continue
		}
		for i, g := range parent.segs {
			if !g.anyDepth && matchGlob(g.glob, c.glob) {
				matched[j] |= 1 << i
			}
		}
	}
	search := coverSearch{
		parent: parent, child: child, limit: limit, matched: matched,
		accept: uint64(1) << len(parent.segs),
		seen:   map[coverState]bool{},
	}
	reversed, found := search.explore(coverState{parent: parent.start()})
	if found {
		slices.Reverse(reversed)
		return coverResult{uncovered: reversed, states: len(search.seen)}
	}
	return coverResult{covered: !search.gaveUp, gaveUp: search.gaveUp, states: len(search.seen)}
}

// coverSearch is decideCover's depth-first search over coverStates.
type coverSearch struct {
	parent, child Pattern
	limit         int
	accept        uint64   // the parent's accepting state
	matched       []uint64 // the parent positions matching each child segment's most general instance
	seen          map[coverState]bool
	gaveUp        bool // the search reached limit
}

// explore searches from s for a path child matches and parent does not,
// and returns it reversed. Depth-first, ending a child "**" before letting
// it produce a segment: the first complete paths tried are the shortest
// shapes, where counterexamples usually are, and a state fully explored
// without one never needs exploring again.
func (cs *coverSearch) explore(s coverState) (uncovered []string, found bool) {
	if cs.seen[s] || cs.gaveUp {
		return nil, false
	}
	if len(cs.seen) >= cs.limit {
		cs.gaveUp = true
		return nil, false
	}
	cs.seen[s] = true
	if s.parent&cs.parent.universal != 0 {
		return nil, false // the parent matches whatever follows
	}
	if s.childPos == len(cs.child.segs) {
		return nil, s.nonEmpty && s.parent&cs.accept == 0
	}
	c := cs.child.segs[s.childPos]
	next := cs.parent.advance(s.parent, cs.matched[s.childPos])
	if c.anyDepth {
		if path, found := cs.explore(coverState{childPos: s.childPos + 1, parent: s.parent, nonEmpty: s.nonEmpty}); found {
			return path, true
		}
		if path, found := cs.explore(coverState{childPos: s.childPos, parent: next, nonEmpty: true}); found {
			return append(path, "*"), true
		}
		return nil, false
	}
	if path, found := cs.explore(coverState{childPos: s.childPos + 1, parent: next, nonEmpty: true}); found {
		return append(path, c.glob), true
	}
	return nil, false
}

// freshRune returns a character that can stand in a target and appears
// nowhere in text. text holds at most MaxPatternSize runes, so the scan ends.
// '.' is never chosen, so that a lone fresh character is never a "." segment.
func freshRune(text string) rune {
	for _, r := range "zqxjkvwy0123456789" {
		if !strings.ContainsRune(text, r) {
			return r
		}
	}
	for r := rune(0xa1); ; r++ {
		if utf8.ValidRune(r) && !strings.ContainsRune(text, r) {
			return r
		}
	}
}
