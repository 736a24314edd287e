package capability

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParsePattern checks that a pattern has one spelling (parse, String,
// parse gives the same pattern), that Match never panics and agrees with
// the reference on small cases, and that the privileged predicates agree.
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
			if !errors.Is(err, ErrInvalidPattern) {
				t.Fatalf("ParsePattern(%q): error %v does not wrap ErrInvalidPattern", pattern, err)
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
		got := p.Match(target)
		if want := refMatch(pattern, target); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, target, got, want)
		}
		if got && IsPrivileged(target) && !MayMatchPrivileged(p) {
			t.Fatalf("%q matches the privileged %q, but MayMatchPrivileged is false", pattern, target)
		}
		for _, root := range privilegedRoots {
			if p.Match(root) && !MayMatchPrivileged(p) {
				t.Fatalf("%q matches %q, but MayMatchPrivileged is false", pattern, root)
			}
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

// FuzzCovers checks soundness against Match: when Covers says the parent
// covers the child, every derived target the child matches, the parent
// matches too; when it says no and shows a counterexample, the
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
		if !Covers(parent, child) {
			if ex, ok := Counterexample(parent, child); ok && (!child.Match(ex) || parent.Match(ex)) {
				t.Fatalf("Counterexample(%q, %q) = %q, which does not separate them", parentText, childText, ex)
			}
			return
		}
		if _, ok := Counterexample(parent, child); ok {
			t.Fatalf("Covers(%q, %q) but Counterexample finds one", parentText, childText)
		}
		for _, x := range derivedTargets(child, target) {
			if child.Match(x) && !parent.Match(x) {
				t.Fatalf("UNSOUND: Covers(%q, %q) but %q matches the child only", parentText, childText, x)
			}
		}
	})
}

// FuzzParseSet checks that a set parses to one meaning: what ParseSet
// accepts writes back to JSON that parses to the same set, and Normalize is
// idempotent and keeps what the set covers.
func FuzzParseSet(f *testing.F) {
	for _, seed := range []string{
		`[]`, `null`, `{}`, `[{"pattern":"workspace/**","actions":["create","mutate"]}]`,
		`[{"pattern":"**","actions":["*"]},{"pattern":"a/*","actions":["observe","observe"]}]`,
		`[{"pattern":"a","actions":["observe"],"x":1}]`, `[{"Pattern":"a","actions":["observe"]}]`,
		`[{"pattern":"a","pattern":"b","actions":["observe"]}]`, `[{"pattern":"a**","actions":["observe"]}]`,
		`[{"pattern":"a","actions":[]}]`, `[{"pattern":"a","actions":[null]}]`, `[null]`,
		`[{"pattern":"b","actions":["mutate"]},{"pattern":"a","actions":["create"]},{"pattern":"b","actions":["create"]}]`,
		`[{"pattern":"a","actions":["observe"],"Actions":["*"]}]`, `[{"pattern":"a","actionſ":["observe"]}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSet(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidGrant) {
				t.Fatalf("ParseSet(%q): error %v does not wrap ErrInvalidGrant", data, err)
			}
			return
		}
		var grants []map[string]json.RawMessage // exact keys
		if err := json.Unmarshal(data, &grants); err != nil {
			t.Fatalf("ParseSet accepted %q, which is not an array of objects: %v", data, err)
		}
		for _, g := range grants {
			for name := range g {
				if name != "pattern" && name != "actions" {
					t.Fatalf("ParseSet accepted %q with the member %q", data, name)
				}
			}
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("ParseSet(%q) gives a set that does not marshal: %v", data, err)
		}
		again, err := ParseSet(out)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("%q: round trip through %s gives %v, %v; want %v", data, out, again, err, s)
		}
		if out2, _ := json.Marshal(again); string(out2) != string(out) {
			t.Fatalf("%q: writes %s, then %s", data, out, out2)
		}
		n := s.Normalize()
		if !reflect.DeepEqual(n.Normalize(), n) {
			t.Fatalf("%q: Normalize is not idempotent", data)
		}
		if !n.Covers(s) || !s.Covers(n) {
			t.Fatalf("%q: Normalize changes what the set covers", data)
		}
	})
}
