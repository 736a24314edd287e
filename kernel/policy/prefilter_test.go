package policy

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func literalStrings(lits [][]byte) []string {
	var ss []string
	for _, l := range lits {
		ss = append(ss, string(l))
	}
	return ss
}

func TestRequiredLiterals(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    []string // nil: no prefilter
	}{
		{`\bssn\b`, []string{"ssn"}},
		{`\bsocial.security\b`, []string{"security"}}, // the longer part
		{`\bdrop\s+table\b`, []string{"table"}},
		{`;\s*--`, []string{"--"}},
		{`'\s*or\s*'1'\s*=\s*'1`, []string{"'1'"}},
		{`PassWord`, []string{"password"}},
		{`a|b*c`, []string{"a", "c"}},
		{`foo|bar|baz`, []string{"foo", "ba"}}, // the parser factors "ba" out
		{`(?:ab)+`, []string{"ab"}},
		{`x{0,3}y`, []string{"y"}},
		{`x{2,}`, []string{"x"}},
		{`[ab]c`, []string{"c"}},
		{`\x{17F}sn`, []string{"ssn"}}, // ſ folds with s: the parser writes s
		{`[ab]+`, nil},
		{`a|[bc]`, nil}, // a branch with no literal
		{`é+`, nil},     // non-ASCII: left to the regular expression
		{`\d{3}-\d{4}`, []string{"-"}},
	} {
		_, lits, err := compilePattern(c.pattern)
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		if got := literalStrings(lits); !slices.Equal(got, c.want) {
			t.Errorf("requiredLiterals(%s) = %q, want %q", c.pattern, got, c.want)
		}
	}
}

// The prefilter changes how fast a pattern is judged, never what it
// judges: every payload gets the verdict of the regular expression alone,
// including payloads whose non-ASCII runes fold to the pattern's letters.
func TestPrefilter_SameVerdictAsTheRegexp(t *testing.T) {
	patterns := []string{`x{2,}`, `a|b*c`, `\x{17F}sn`, `k+`, `\d{3}-\d{4}`, `foo|bar|baz`}
	for _, p := range Defaults() {
		patterns = append(patterns, p.BlockedPatterns...)
	}
	payloads := []string{
		``, `{}`, `{"q":"nothing here"}`, `{"q":"my SSN is 123"}`, `{"q":"my ſsn is 123"}`, `{"q":"ſſn"}`,
		`{"q":"Social-Security"}`, `{"q":"PASSWORD"}`, `{"q":"paſſword"}`, `{"q":"the \u212Aelvin"}`, `{"k":1}`,
		`x; -- y`, `' OR '1'='1`, `DROP   TABLE users`, `delete from t`, `555-1234`, `xx`, `bc`, `ba`, `BAZ`,
		`{"q":"é ssn"}`, strings.Repeat("lorem ipsum ", 100) + "ssn",
	}
	for _, pat := range patterns {
		c, err := Compile(Policy{Name: "p", BlockedPatterns: []string{pat}})
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile("(?i)" + pat)
		for _, payload := range payloads {
			blocked := c.Check(nil, []byte(payload)) != nil
			if want := re.MatchString(payload); blocked != want {
				t.Errorf("pattern %s, payload %q: blocked %v, the regular expression alone says %v", pat, payload, blocked, want)
			}
		}
	}
}

// FuzzPrefilter: whatever pattern Validate accepts and whatever payload,
// a payload the regular expression matches is never cleared by the
// pattern's prefilter.
func FuzzPrefilter(f *testing.F) {
	for _, p := range Defaults() {
		for _, pat := range p.BlockedPatterns {
			f.Add(pat, []byte(`{"q":"ssn drop table ' or '1'='1 ;--"}`))
		}
	}
	for _, seed := range [][2]string{
		{`\x{17F}sn`, "ſsn"}, {`k+`, "\u212A"}, {`a|b*c`, "BC"}, {`(?:ab){2}`, "aBAb"}, {`[a-z]+q`, "Q"},
		{`x{2,}`, "xX"}, {`é`, "É"}, {`(a|b)(c|d)`, "BD"}, {`\Qa.b\E`, "A.B"},
	} {
		f.Add(seed[0], []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, pattern string, payload []byte) {
		re, lits, err := compilePattern(pattern)
		if err != nil {
			return
		}
		if re.Match(payload) && !(&foldedPayload{payload: payload}).mayMatch(lits) {
			t.Fatalf("pattern %q matches %q, but its prefilter (%q) clears it", pattern, payload, literalStrings(lits))
		}
	})
}
