package capability

import (
	"fmt"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// nastyPattern has 31 "**" and a glob with three '*': a backtracking matcher
// would try every way of splitting the target among the "**"s.
var nastyPattern = mustParsePattern(strings.Repeat("**/", 31) + "x*y*z*")

// nastyTarget returns a target of about size bytes whose every segment
// almost matches the glob and whose last one does not.
func nastyTarget(size int) string {
	var b strings.Builder
	for b.Len()+len("xyxyxy/")+len("xyy") <= size {
		b.WriteString("xyxyxy/")
	}
	b.WriteString("xyy")
	return b.String()
}

func BenchmarkMatch(b *testing.B) {
	for _, tc := range []struct {
		name    string
		pattern Pattern
		target  string
	}{
		{"workspace", mustParsePattern("workspace/**"), "workspace/projects/annal/notes.md"},
		{"json", mustParsePattern("data/*.json"), "data/report-2024.json"},
		{"miss", mustParsePattern("mail/inbox/*"), "workspace/projects/annal/notes.md"},
		{"glob_backtrack", mustParsePattern("*a*a*a*a*a*a*a*a*b"), strings.Repeat("a", 1000)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				tc.pattern.Match(tc.target)
			}
		})
	}
	// Time grows linearly with the target: double the size, double the time.
	for _, size := range []int{128, 256, 512, 1024} {
		target := nastyTarget(size)
		if nastyPattern.Match(target) || event.ValidateTarget(target) != nil {
			b.Fatalf("the nasty target %q matches or is not a target", target)
		}
		b.Run(fmt.Sprintf("nasty_%dB", size), func(b *testing.B) {
			b.SetBytes(int64(len(target)))
			for b.Loop() {
				nastyPattern.Match(target)
			}
		})
	}
}

func BenchmarkCovers(b *testing.B) {
	hardParent, hardChild := hardPair()
	for _, tc := range []struct {
		name          string
		parent, child Pattern
	}{
		{"subtree", mustParsePattern("workspace/**"), mustParsePattern("workspace/*/notes/*.md")},
		{"not_covered", mustParsePattern("workspace/*"), mustParsePattern("workspace/**")},
		{"globs", mustParsePattern("*a*"), mustParsePattern("*a*a*")},
		{"alignments", mustParsePattern("**/x/*/**"), mustParsePattern("x/**/x")},
		{"root", mustParsePattern("**"), nastyPattern},
		{"gives_up", hardParent, hardChild},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				decideCover(tc.parent, tc.child, maxCoverStates)
			}
		})
	}
}

// BenchmarkSetCovers is delegation between two full sets of grants: with
// ordinary patterns, every pair searched, and with patterns built to make
// every search give up.
func BenchmarkSetCovers(b *testing.B) {
	var parent, child Set
	for i := range maxGrants {
		parent = append(parent, Grant{Pattern: mustParsePattern(fmt.Sprintf("team%d/**/*.md", i)), Actions: []event.ActionType{event.Create}})
		child = append(child, Grant{Pattern: mustParsePattern(fmt.Sprintf("team%d/docs/**/x.md", maxGrants-1-i)), Actions: []event.ActionType{event.Create}})
	}
	if err := parent.CheckCovers(child); err != nil {
		b.Fatal(err)
	}
	b.Run("ordinary", func(b *testing.B) {
		for b.Loop() {
			parent.CheckCovers(child)
		}
	})
	// The worst: every pair gives up at maxCoverStates, until the set's
	// budget, maxSetCoverStates, is spent.
	hardParent, hardChild := hardPair()
	var hardSet Set
	for range maxGrants {
		hardSet = append(hardSet, Grant{Pattern: hardParent, Actions: []event.ActionType{event.Observe}})
	}
	hardChildSet := Set{{Pattern: hardChild, Actions: []event.ActionType{event.Observe}}}
	b.Run("worst", func(b *testing.B) {
		for b.Loop() {
			hardSet.CheckCovers(hardChildSet)
		}
	})
}
