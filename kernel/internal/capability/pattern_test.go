package capability

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// mustParsePattern is ParsePattern for patterns written in tests; it panics
// on an invalid one.
func mustParsePattern(s string) Pattern {
	p, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

// refMatch is the definition of matching, written as directly as possible:
// recursion on the segments, then on the characters of each segment glob,
// memoised on what remains of each so that it stays polynomial.
func refMatch(pattern, target string) bool {
	if event.ValidateTarget(target) != nil {
		return false
	}
	ps, ts := strings.Split(pattern, "/"), strings.Split(target, "/")
	memo := map[[2]int]bool{}
	var rest func(ps, ts []string) bool
	rest = func(ps, ts []string) bool {
		key := [2]int{len(ps), len(ts)}
		if v, ok := memo[key]; ok {
			return v
		}
		var v bool
		switch {
		case len(ps) == 0:
			v = len(ts) == 0
		case ps[0] == "**":
			v = rest(ps[1:], ts) || (len(ts) > 0 && rest(ps, ts[1:]))
		default:
			v = len(ts) > 0 && refGlob(ps[0], ts[0]) && rest(ps[1:], ts[1:])
		}
		memo[key] = v
		return v
	}
	return rest(ps, ts)
}

func refGlob(glob, s string) bool {
	memo := map[[2]int]bool{}
	var rest func(glob, s string) bool
	rest = func(glob, s string) bool {
		key := [2]int{len(glob), len(s)}
		if v, ok := memo[key]; ok {
			return v
		}
		var v bool
		switch {
		case glob == "":
			v = s == ""
		case glob[0] == '*':
			v = rest(glob[1:], s) || (s != "" && rest(glob, s[1:]))
		default:
			v = s != "" && glob[0] == s[0] && rest(glob[1:], s[1:])
		}
		memo[key] = v
		return v
	}
	return rest(glob, s)
}

func TestParsePattern_Rejects(t *testing.T) {
	for _, tc := range []struct {
		name, pattern, wantErr string
	}{
		{"empty", "", "the pattern is empty"},
		{"too long", strings.Repeat("a", maxPatternSize+1), "more than 1024"},
		{"too many segments", strings.Repeat("a/", maxPatternSegments) + "a", "33 segments, more than 32"},
		{"invalid UTF-8", "a/\xff", "not valid UTF-8"},
		{"control character", "a/b\x00", "control character"},
		{"tab", "a\tb", "control character"},
		{"DEL", "a\x7f", "control character"},
		{"backslash", `a\b`, "backslash"},
		{"leading slash", "/a", "empty path segment"},
		{"trailing slash", "a/", "empty path segment"},
		{"double slash", "a//b", "empty path segment"},
		{"lone slash", "/", "empty path segment"},
		{"dot segment", "a/./b", `a "." segment`},
		{"dot-dot segment", "../a", `a ".." segment`},
		{"** after text", "a**", "** must be a whole segment"},
		{"** before text", "**a", "** must be a whole segment"},
		{"** inside text", "a**b", "** must be a whole segment"},
		{"three stars", "***", "** must be a whole segment"},
		{"three stars in text", "a***b", "** must be a whole segment"},
		{"** in a later segment", "workspace/x**", "** must be a whole segment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePattern(tc.pattern)
			if err == nil {
				t.Fatalf("ParsePattern(%q) succeeds", tc.pattern)
			}
			if !errors.Is(err, errInvalidPattern) {
				t.Errorf("error %v does not wrap errInvalidPattern", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestParsePattern_Accepts(t *testing.T) {
	for _, s := range []string{
		"**", "*", "a", "workspace/**", "workspace/*", "data/*.json", "*a*b*", "a.b", "...", ".a", "**/**",
		"**/*/**", "mail/inbox/42", "é/*ü*", "a b/c", "a<b&c>",
		strings.Repeat("a/", maxPatternSegments-1) + "a",
		strings.Repeat("a", maxPatternSize),
	} {
		p, err := ParsePattern(s)
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", s, err)
			continue
		}
		if p.String() != s {
			t.Errorf("ParsePattern(%q).String() = %q", s, p.String())
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{"workspace/*", []string{"workspace/a", "workspace/x.json"}, []string{"workspace", "workspace/a/b", "other/a", "workspacex/a"}},
		{"workspace/**", []string{"workspace", "workspace/a", "workspace/a/b", "workspace/a/b/c/d"}, []string{"workspaces", "other/workspace", "work"}},
		{"data/*.json", []string{"data/x.json", "data/.json", "data/a.b.json"}, []string{"data/x.jso", "data/x.json/y", "data/x/y.json"}},
		{"**", []string{"a", "a/b", "system/x", strings.Repeat("a/", 500) + "a"}, nil},
		{"*", []string{"a", "system"}, []string{"a/b"}},
		{"**/x", []string{"x", "a/x", "a/b/x"}, []string{"a", "x/a", "ax"}},
		{"a/**/b", []string{"a/b", "a/x/b", "a/x/y/b", "a/b/b"}, []string{"a", "b", "a/b/c"}},
		{"**/*", []string{"a", "a/b"}, nil},
		{"*/**", []string{"a", "a/b"}, nil},
		{"*/*/**", []string{"a/b", "a/b/c"}, []string{"a"}},
		{"**/a/**", []string{"a", "x/a", "a/x", "x/a/y"}, []string{"x", "x/ab"}},
		{"*a*", []string{"a", "ba", "ab", "bab"}, []string{"b", "a/b"}},
		{"a*b*c", []string{"abc", "aXbYc", "abbc", "acbc"}, []string{"ab", "acb", "abcx"}},
		{"é*", []string{"é", "éü"}, []string{"e", "üé"}},
		{"mail/inbox/42", []string{"mail/inbox/42"}, []string{"mail/inbox/4", "mail/inbox/42/x"}},
	} {
		p := mustParsePattern(tc.pattern)
		for _, target := range tc.yes {
			if !p.Match(target) {
				t.Errorf("%q does not match %q", tc.pattern, target)
			}
		}
		for _, target := range tc.no {
			if p.Match(target) {
				t.Errorf("%q matches %q", tc.pattern, target)
			}
		}
	}
}

// TestMatch_InvalidTargets pins that a pattern never matches what
// event.ValidateTarget refuses, even "**" and even where the glob would.
func TestMatch_InvalidTargets(t *testing.T) {
	for _, target := range []string{
		"", "/", "a/", "/a", "a//b", ".", "a/..", "a/./b", "a\\b", "a\x00", "\xff",
		strings.Repeat("a", event.MaxTargetSize+1),
	} {
		for _, pattern := range []string{"**", "*", "*/*", "a/*/b", "a/**"} {
			if mustParsePattern(pattern).Match(target) {
				t.Errorf("%q matches the invalid target %q", pattern, target)
			}
		}
	}
	if (Pattern{}).Match("a") {
		t.Error("the zero Pattern matches")
	}
}

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		glob, s string
		want    bool
	}{
		{"", "", true}, {"*", "", true}, {"*", "abc", true}, {"a*", "a", true}, {"a*", "ba", false},
		{"*a", "ba", true}, {"*a", "ab", false}, {"*a*a*", "aa", true}, {"*a*a*", "a", false},
		{"a*b*c", "abbbc", true}, {"a*b*c", "acb", false}, {"*ab", "aab", true}, {"*ab*cd", "abxabcd", true},
		// A '*' in s is a character no literal matches: the inclusion test.
		{"a*", "ab*", true}, {"ab*", "a*", false}, {"*a*", "*a*a*", true}, {"*", "*", true}, {"a*", "*", false},
	} {
		if got := matchGlob(tc.glob, tc.s); got != tc.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tc.glob, tc.s, got, tc.want)
		}
	}
}

// TestMatch_AgreesWithReference compares Match with refMatch on random
// patterns and targets over a small alphabet, where collisions are frequent.
func TestMatch_AgreesWithReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	segs := []string{"a", "b", "ab", "*", "a*", "*b", "*a*", "**", "a*b"}
	words := []string{"a", "b", "ab", "ba", "aab", "abb", "c"}
	for range 20000 {
		pattern := randomPath(rng, segs, 5)
		target := randomPath(rng, words, 6)
		p := mustParsePattern(pattern)
		if got, want := p.Match(target), refMatch(pattern, target); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, target, got, want)
		}
	}
}

// randomPath joins 1 to maxDepth segments drawn from segs.
func randomPath(rng *rand.Rand, segs []string, maxDepth int) string {
	n := 1 + rng.IntN(maxDepth)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = segs[rng.IntN(len(segs))]
	}
	return strings.Join(parts, "/")
}
