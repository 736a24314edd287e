package capability

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// FuzzParsePattern checks that a pattern has one spelling (parse, String,
// parse gives the same pattern), and that Match never panics and agrees with
// the reference on small cases.
func FuzzParsePattern(f *testing.F) {
	for _, seed := range []struct{ pattern, target string }{
		{"workspace/**", "workspace/a/b"}, {"workspace/*", "workspace/a/b"}, {"data/*.json", "data/x.json"},
		{"**", "system/x"}, {"*/x", "ledger/x"}, {"a**", "a"}, {"***", "a"}, {"a//b", "a/b"}, {"./a", "a"},
		{"*a*a*a*b", "aaaaaaaa"}, {"**/**/x*y*z*", "a/b/xyz"}, {"é/*", "é/ü"}, {"a\\b", "a"}, {"", ""},
		{"a/\xff", "a"}, {strings.Repeat("a/", 32) + "a", "a"}, {"s*/a", "system/a"},
	} {
		f.Add(seed.pattern, seed.target)
	}
	f.Fuzz(func(t *testing.T, pattern, target string) {
		p, err := ParsePattern(pattern)
		if err != nil {
			if !errors.Is(err, errInvalidPattern) {
				t.Fatalf("ParsePattern(%q): error %v does not wrap errInvalidPattern", pattern, err)
			}
			return
		}
		if p.String() != pattern {
			t.Fatalf("ParsePattern(%q).String() = %q", pattern, p.String())
		}
		q, err := ParsePattern(p.String())
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("ParsePattern(%q) again: %v, %v", p.String(), q, err)
		}
		if got, want := p.Match(target), refMatch(pattern, target); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, target, got, want)
		}
	})
}

// derivedTargets returns targets built from a pattern: each "**" replaced by
// 0, 1 or 2 segments and each '*' by some text, plus the extra target.
func derivedTargets(pattern Pattern, extra string) []string {
	targets := []string{extra}
	for _, fill := range []struct{ star, segs string }{
		{"", ""}, {"a", "a"}, {"z", "z/z"}, {"ab", "b"}, {"x.json", "a/b"}, {"a", ""}, {"", "x"},
	} {
		var parts []string
		for _, seg := range pattern.segs {
			switch {
			case seg.anyDepth && fill.segs != "":
				parts = append(parts, fill.segs)
			case !seg.anyDepth:
				parts = append(parts, strings.ReplaceAll(seg.glob, "*", fill.star))
			}
		}
		targets = append(targets, strings.Join(parts, "/"))
	}
	return targets
}

// FuzzCovers checks soundness against Match: when the parent's pattern
// covers the child's, every derived target the child matches, the parent
// matches too; when it does not and a counterexample is shown, the
// counterexample separates them.
func FuzzCovers(f *testing.F) {
	for _, c := range coverCases {
		f.Add(c.parent, c.child, "workspace/a")
	}
	f.Add("**/a/*/*/**", "**/a/**/a/**/b", "a/a/b")
	f.Add("a*", "a", "a")
	f.Fuzz(func(t *testing.T, parentText, childText, target string) {
		parent, err := ParsePattern(parentText)
		if err != nil {
			return
		}
		child, err := ParsePattern(childText)
		if err != nil {
			return
		}
		if !patternCovers(parent, child) {
			if ex, ok := counterexample(parent, child); ok && (!child.Match(ex) || parent.Match(ex)) {
				t.Fatalf("counterexample(%q, %q) = %q, which does not separate them", parentText, childText, ex)
			}
			return
		}
		if _, ok := counterexample(parent, child); ok {
			t.Fatalf("%q covers %q but counterexample finds one", parentText, childText)
		}
		for _, x := range derivedTargets(child, target) {
			if child.Match(x) && !parent.Match(x) {
				t.Fatalf("UNSOUND: %q covers %q but %q matches the child only", parentText, childText, x)
			}
		}
	})
}

// FuzzSetFromEvent checks the reading of an event's grants, as the ledger
// reads them for every delegation: what SetFromEvent accepts keeps each
// pattern as written and lists exactly the action types given, sorted and
// distinct; what it refuses is an invalid grant; and an accepted set covers
// itself, within the search bounds. The input is decoded leniently into event grants, so that the
// fuzzer reaches SetFromEvent with any patterns and action names.
func FuzzSetFromEvent(f *testing.F) {
	for _, seed := range []string{
		`[]`, `null`, `[{"pattern":"workspace/**","actions":["create","mutate"]}]`,
		`[{"pattern":"**","actions":["create","execute","mutate","observe"]},{"pattern":"a/*","actions":["observe","observe"]}]`,
		`[{"pattern":"a","actions":["*"]}]`, `[{"pattern":"a**","actions":["observe"]}]`,
		`[{"pattern":"a","actions":[]}]`, `[{"pattern":"a","actions":["Observe"]}]`, `[{"pattern":"","actions":["observe"]}]`,
		`[{"pattern":"b","actions":["mutate"]},{"pattern":"a","actions":["create"]},{"pattern":"b","actions":["create"]}]`,
		`[{"pattern":"**/x/*/**","actions":["observe"]},{"pattern":"x/**/x","actions":["observe","execute"]}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var grants []event.Grant
		if json.Unmarshal(data, &grants) != nil {
			return
		}
		s, err := SetFromEvent(grants)
		if err != nil {
			if !errors.Is(err, errInvalidGrant) {
				t.Fatalf("SetFromEvent(%s): error %v does not wrap errInvalidGrant", data, err)
			}
			return
		}
		if len(s) != len(grants) {
			t.Fatalf("SetFromEvent(%s) gives %d grants", data, len(s))
		}
		for i, g := range s {
			if g.Pattern.String() != grants[i].Pattern {
				t.Fatalf("%s: grant %d has the pattern %q", data, i+1, g.Pattern.String())
			}
			want := slices.Clone(grants[i].Actions)
			slices.Sort(want)
			if want = slices.Compact(want); !slices.Equal(g.Actions, want) {
				t.Fatalf("%s: grant %d lists %v, want %v", data, i+1, g.Actions, want)
			}
			for _, a := range g.Actions {
				if !a.Valid() {
					t.Fatalf("%s: grant %d lists %q", data, i+1, a)
				}
			}
		}
		// A set covers itself, unless the searches through the other grants
		// spend the set's budget first.
		if err := s.CheckCovers(s); err != nil && !strings.Contains(err.Error(), "more search states than its limit") {
			t.Fatalf("%s: the set does not cover itself: %v", data, err)
		}
	})
}
