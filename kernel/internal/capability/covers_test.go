package capability

import (
	"strings"
	"testing"
)

// patternCovers is what CheckCovers asks of each pair of grants: whether
// parent covers child, deciding within maxCoverStates search states.
func patternCovers(parent, child Pattern) bool {
	return decideCover(parent, child, maxCoverStates).covered
}

// coverCases are (parent, child) pairs with the answer language inclusion
// gives. The first block is the list.
var coverCases = []struct {
	parent, child string
	want          bool
}{
	{"workspace/**", "workspace/*", true},
	{"workspace/*", "workspace/**", false},
	{"workspace/*", "workspace/a", true},
	{"**/*", "*/**", true},
	{"*/**", "**/*", true},
	// The empty path is not a target, so "**" and "*/**" match the same
	// targets: the "false?" is true once the empty path is ignored.
	{"*/**", "**", true},
	{"a*", "ab*", true},
	{"*a*", "*a*a*", true},
	{"a*", "*", false},
	{"data/*.json", "data/x.json", true},
	{"**", "workspace/a", true},
	{"**", "**", true},
	{"**", "*/*/**", true},
	{"**", "a*b/**/c", true},

	// Depth.
	{"workspace/*", "workspace/*/*", false},
	{"workspace/**", "workspace/**", true},
	{"workspace/**", "workspace", true},
	{"workspace/**", "workspace/a/**", true},
	{"workspace/a/**", "workspace/**", false},
	{"workspace/*/**", "workspace/**", false},
	{"workspace/**", "workspace/*/**", true},
	{"*/*", "*/**", false},
	{"*/**", "*/*", true},
	{"*/*/**", "**/*/*", true},
	{"**/*/*", "*/*/**", true},
	{"**/*/**", "**", true},
	{"*/*/**", "**", false},
	{"**/**", "**", true},
	{"**", "**/**/**", true},
	{"a/**/b", "a/b", true},
	{"a/**/b", "a/*/b", true},
	{"a/**/b", "a/**/x/**/b", true},
	{"a/**/b", "a/**", false},
	{"a/*/b", "a/**/b", false},
	{"**/b", "a/**/b", true},
	{"**/b", "**/a", false},
	{"**/x/**", "**/x/**/x/**", true},
	{"**/x/**/x/**", "**/x/**", false},
	{"**/x/**", "x/**/y", true},
	{"**/a/**", "**/a*/**", false},

	// Covered only by different alignments for different paths: every path
	// of "x/**/x" has an x that is not last, but no one alignment of
	// "**/x/*/**" fits them all (the child's first x followed by the child's
	// last x, or by a segment of the "**").
	{"**/x/*/**", "x/**/x", true},
	{"**/x/*/**", "x/**", false},
	{"**/a/*", "a/a/*", true},
	{"**/a/*", "**/a/**", false},

	// Globs within a segment.
	{"*", "a", true},
	{"*", "a*b", true},
	{"a*", "a", true},
	{"a*", "b", false},
	{"*b", "a*b", true},
	{"a*b", "ab", true},
	{"a*b", "a*", false},
	{"a*b", "a*c*b", true},
	{"a*c*b", "a*b", false},
	{"*.json", "data.json", true},
	{"*.json", "*.jso", false},
	{"*.json", "*x.json", true},
	{"x*.json", "*.json", false},
	{"*a*", "*ab*", true},
	{"*ab*", "*a*b*", false},
	{"*a*b*", "*ab*", true},
	{"*a*", "b", false},
	{"*a*a*", "*a*", false},
	{"ab*", "a*", false},
	{"data/*.json", "data/*", false},
	{"data/*", "data/*.json", true},
	{"**/*.json", "data/**/x.json", true},
	{"**/*.json", "data/**", false},

	// Privileged roots are ordinary segments to the search.
	{"**", "system/*", true},
	{"s*/**", "system/*", true},
	{"system/*", "s*/*", false},
}

// TestDef4_12_Covers checks the inclusion of patterns on the table and,
// where it does not hold, that counterexample shows a target the child matches and the parent does not.
func TestDef4_12_Covers(t *testing.T) {
	for _, tc := range coverCases {
		parent, child := mustParsePattern(tc.parent), mustParsePattern(tc.child)
		if got := patternCovers(parent, child); got != tc.want {
			t.Errorf("patternCovers(%q, %q) = %v, want %v", tc.parent, tc.child, got, tc.want)
			continue
		}
		target, ok := counterexample(parent, child)
		switch {
		case tc.want && ok:
			t.Errorf("counterexample(%q, %q) = %q although patternCovers is true", tc.parent, tc.child, target)
		case !tc.want && !ok:
			t.Errorf("patternCovers(%q, %q) is false but counterexample finds no target", tc.parent, tc.child)
		case !tc.want && (!child.Match(target) || parent.Match(target)):
			t.Errorf("counterexample(%q, %q) = %q, which does not separate them", tc.parent, tc.child, target)
		}
	}
}

func TestCovers_Reflexive(t *testing.T) {
	for _, tc := range coverCases {
		for _, s := range []string{tc.parent, tc.child} {
			if p := mustParsePattern(s); !patternCovers(p, p) {
				t.Errorf("patternCovers(%q, %q) is false", s, s)
			}
		}
	}
}

func TestCovers_ZeroPattern(t *testing.T) {
	all := mustParsePattern("**")
	if patternCovers(Pattern{}, all) || patternCovers(all, Pattern{}) || patternCovers(Pattern{}, Pattern{}) {
		t.Error("patternCovers holds with a zero Pattern")
	}
}

// TestCounterexample_Examples pins the counterexamples used in error
// messages, and that the fresh character avoids the parent's characters.
func TestCounterexample_Examples(t *testing.T) {
	for _, tc := range []struct{ parent, child, want string }{
		{"workspace/*", "workspace/**", "workspace"},
		{"workspace/*", "workspace/*/*", "workspace/z/z"},
		{"a*", "*", "z"},
		{"z*", "*", "q"},
		{"**/x/**", "**", "z"},
		{"a/**/b", "a/**", "a"},
		{"zqxjkvwy0123456789", "*", "¡"},
	} {
		got, ok := counterexample(mustParsePattern(tc.parent), mustParsePattern(tc.child))
		if !ok || got != tc.want {
			t.Errorf("counterexample(%q, %q) = %q, %v; want %q", tc.parent, tc.child, got, ok, tc.want)
		}
	}
}

// hardPair is built to make inclusion costly. Inclusion holds: the child's
// first "a" is followed by 14 more and a "b", at least the 12 segments the
// parent asks for. But the parent must remember which of its last 12
// segments were "a", and the child can place 15 of them with gaps of any
// length, so deciding takes about 12,000 states.
func hardPair() (parent, child Pattern) {
	parent = mustParsePattern("**/a/" + strings.Repeat("*/", 12) + "**")
	child = mustParsePattern(strings.Repeat("**/a/", 15) + "**/b")
	return parent, child
}

// TestCovers_GivesUpAtBound checks the bounded search: on a pair that needs
// more than maxCoverStates states the pair is refused although inclusion
// holds (conservative, sound), and counterexample has nothing to show.
func TestCovers_GivesUpAtBound(t *testing.T) {
	parent, child := hardPair()
	if r := decideCover(parent, child, maxCoverStates); !r.gaveUp || r.covered || r.uncovered != nil || r.states != maxCoverStates {
		t.Fatalf("decideCover on the hard pair = %+v; want it to give up", r)
	}
	if patternCovers(parent, child) {
		t.Error("patternCovers is true on a pair it gave up on")
	}
	if target, ok := counterexample(parent, child); ok {
		t.Errorf("counterexample = %q on a pair the search gave up on", target)
	}
}

// TestCovers_CommonPatternsStaySmall checks that patterns people write are
// decided far below the bound.
func TestCovers_CommonPatternsStaySmall(t *testing.T) {
	for _, tc := range coverCases {
		if r := decideCover(mustParsePattern(tc.parent), mustParsePattern(tc.child), maxCoverStates); r.states > 64 {
			t.Errorf("patternCovers(%q, %q) reaches %d states", tc.parent, tc.child, r.states)
		}
	}
}
