package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestAgentOS_PolicyParse(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       *Policy // nil: refused
	}{
		{"full", `{"name":"bank","blocked_actions":["transfer_funds"],"blocked_patterns":["\\$\\d{6,}"],"audit_all":true,"signal_on_violation":true}`,
			&Policy{Name: "bank", BlockedActions: []string{"transfer_funds"}, BlockedPatterns: []string{`\$\d{6,}`}, AuditAll: true, SignalOnViolation: true}},
		// Seed 002: "If ANY check fails → SIGKILL": left out, the flag is on.
		{"name only", `{"name":"x"}`, &Policy{Name: "x", SignalOnViolation: true}},
		{"deny only, said so", `{"name":"x","signal_on_violation":false}`, &Policy{Name: "x"}},
		{"whitespace", " {\"name\" : \"x\"}\n", &Policy{Name: "x", SignalOnViolation: true}},
		{"no name", `{}`, nil},
		{"unknown key", `{"name":"x","max_calls_per_hour":10}`, nil},
		{"002's max_calls_per_minute", `{"name":"banking","blocked_actions":["transfer_funds"],"blocked_patterns":["\\$\\d{6,}"],"max_calls_per_minute":10}`,
			&Policy{Name: "banking", BlockedActions: []string{"transfer_funds"}, BlockedPatterns: []string{`\$\d{6,}`}, MaxCallsPerMinute: 10, SignalOnViolation: true}},
		{"max_calls_per_minute negative", `{"name":"x","max_calls_per_minute":-1}`, nil},
		{"max_calls_per_minute too large", `{"name":"x","max_calls_per_minute":1000001}`, nil},
		{"max_calls_per_minute not a whole number", `{"name":"x","max_calls_per_minute":1.5}`, nil},
		{"key in another case", `{"Name":"x"}`, nil},
		{"key in another case beside the exact one", `{"name":"x","Name":"y"}`, nil},
		{"key with a long s (U+017F), which folds to s", `{"name":"x","blocked_actionſ":["transfer_funds"]}`, nil},
		{"key twice", `{"name":"x","name":"y"}`, nil},
		{"trailing data", `{"name":"x"} {}`, nil},
		{"trailing garbage", `{"name":"x"}]`, nil},
		{"array", `[{"name":"x"}]`, nil},
		{"null", `null`, nil},
		{"empty", ``, nil},
		{"wrong type", `{"name":"x","audit_all":"yes"}`, nil},
		{"action not a string", `{"name":"x","blocked_actions":[1]}`, nil},
		{"too big", `{"name":"x","blocked_actions":["` + strings.Repeat("a", MaxPolicySize) + `"]}`, nil},
		{"bad name", `{"name":"Read_Only"}`, nil},
		{"bad pattern", `{"name":"x","blocked_patterns":["(?=x)"]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.data))
			if tc.want == nil {
				if err == nil {
					t.Fatalf("Parse(%q) = %+v, want an error", tc.data, p)
				}
				if !errors.Is(err, ErrInvalidPolicy) {
					t.Fatalf("Parse(%q): %v does not wrap ErrInvalidPolicy", tc.data, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.data, err)
			}
			if !reflect.DeepEqual(p, *tc.want) {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.data, p, *tc.want)
			}
		})
	}
}

func TestAgentOS_PolicyValidate(t *testing.T) {
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		p     Policy
		valid bool
		why   string // part of the error
	}{
		{"defaults shape", Policy{Name: "a", BlockedActions: []string{"x"}, BlockedPatterns: []string{"y"}}, true, ""},
		{"name 64", Policy{Name: "a" + strings.Repeat("b", 63)}, true, ""},
		{"name 65", Policy{Name: "a" + strings.Repeat("b", 64)}, false, "name"},
		{"name digit first", Policy{Name: "1a"}, false, "name"},
		{"name newline", Policy{Name: "a\n"}, false, "name"},
		{"256 actions", Policy{Name: "a", BlockedActions: many(256, func(i int) string { return strings.Repeat("x", i+1) })}, true, ""},
		{"257 actions", Policy{Name: "a", BlockedActions: many(257, func(i int) string { return strings.Repeat("x", i+1) })}, false, "more than 256"},
		{"action 256 bytes", Policy{Name: "a", BlockedActions: []string{strings.Repeat("x", 256)}}, true, ""},
		{"action 257 bytes", Policy{Name: "a", BlockedActions: []string{strings.Repeat("x", 257)}}, false, "more than 256"},
		{"empty action", Policy{Name: "a", BlockedActions: []string{""}}, false, "empty"},
		{"action with space", Policy{Name: "a", BlockedActions: []string{"a b"}}, true, ""},
		{"action with tab", Policy{Name: "a", BlockedActions: []string{"a\tb"}}, false, "unprintable"},
		{"action with nbsp", Policy{Name: "a", BlockedActions: []string{"a\u00a0b"}}, false, "unprintable"},
		{"action not UTF-8", Policy{Name: "a", BlockedActions: []string{"a\xff"}}, false, "UTF-8"},
		{"action twice", Policy{Name: "a", BlockedActions: []string{"x", "x"}}, false, "twice"},
		{"64 patterns", Policy{Name: "a", BlockedPatterns: many(64, func(i int) string { return strings.Repeat("x", i+1) })}, true, ""},
		{"65 patterns", Policy{Name: "a", BlockedPatterns: many(65, func(i int) string { return strings.Repeat("x", i+1) })}, false, "more than 64"},
		{"pattern 512 bytes", Policy{Name: "a", BlockedPatterns: []string{strings.Repeat("x", 512)}}, true, ""},
		{"pattern 513 bytes", Policy{Name: "a", BlockedPatterns: []string{strings.Repeat("x", 513)}}, false, "more than 512"},
		{"pattern twice", Policy{Name: "a", BlockedPatterns: []string{"x", "x"}}, false, "twice"},
		{"lookahead", Policy{Name: "a", BlockedPatterns: []string{"(?=x)y"}}, false, "RE2"},
		{"backreference", Policy{Name: "a", BlockedPatterns: []string{`(a)\1`}}, false, "RE2"},
		{"unbalanced", Policy{Name: "a", BlockedPatterns: []string{`(a`}}, false, "RE2"},
		{"case folding off", Policy{Name: "a", BlockedPatterns: []string{`(?-i)SSN`}}, false, "case-insensitive"},
		{"case folding off in group", Policy{Name: "a", BlockedPatterns: []string{`x(?s-i:SSN)`}}, false, "case-insensitive"},
		{"other flags", Policy{Name: "a", BlockedPatterns: []string{`(?s)a.b`}}, true, ""},
		{"pattern not UTF-8", Policy{Name: "a", BlockedPatterns: []string{"a\xff"}}, false, "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.valid {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Validate = %v, want an ErrInvalidPolicy about %q", err, tc.why)
			}
		})
	}
}

// TestAgentOS_PolicyEmptyMatchRefused covers patterns whose match can be
// empty: each would block on position alone.
func TestAgentOS_PolicyEmptyMatchRefused(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		refused bool
	}{
		{``, true}, {`x*`, true}, {`a?`, true}, {`^`, true}, {`$`, true}, {`\b`, true}, {`\B`, true},
		{`(?:)`, true}, {`()`, true}, {`a|`, true}, {`|a`, true}, {`(a*)(b?)`, true}, {`x{0,3}`, true},
		{`^$`, true}, {`(?m)^\s*$`, true}, {`\A\z`, true}, {`(a|b*)`, true},
		{`a`, false}, {`a+`, false}, {`x{1,3}`, false}, {`\bssn\b`, false}, {`^a`, false}, {`a*b`, false},
		{`(a|b)`, false}, {`(a*b|c)`, false}, {`.`, false}, {`[^a]`, false}, {`(a+)*b`, false},
	} {
		err := (Policy{Name: "p", BlockedPatterns: []string{tc.pattern}}).Validate()
		if got := err != nil; got != tc.refused {
			t.Errorf("pattern %q: refused = %v (%v), want %v", tc.pattern, got, err, tc.refused)
		}
		if tc.refused && err != nil && !strings.Contains(err.Error(), "empty") {
			t.Errorf("pattern %q: error %v does not say the match can be empty", tc.pattern, err)
		}
	}
}

func TestAgentOS_PolicyDefaults(t *testing.T) {
	got := Defaults()
	names := []string{}
	for _, p := range got {
		names = append(names, p.Name)
		if err := p.Validate(); err != nil {
			t.Errorf("default %s: %v", p.Name, err)
		}
	}
	if want := []string{"read_only", "no_pii", "strict", "audit"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Defaults names = %v, want %v", names, want)
	}
	// Each ends the agent that breaks it: "Policy Violation → SIGKILL".
	want := map[string]Policy{
		"read_only": {Name: "read_only", BlockedActions: []string{"file_write", "database_write", "send_email", "api_call_write", "delete"}, SignalOnViolation: true},
		"no_pii":    {Name: "no_pii", BlockedPatterns: []string{`\bssn\b`, `\bsocial.security\b`, `\bcredit.card\b`, `\bpassword\b`}, SignalOnViolation: true},
		"strict": {Name: "strict", BlockedActions: []string{"shell_exec", "eval", "raw_sql"},
			BlockedPatterns: []string{`\bdrop\s+table\b`, `\bdelete\s+from\b`, `;\s*--`, `'\s*or\s*'1'\s*=\s*'1`}, SignalOnViolation: true},
		"audit": {Name: "audit", AuditAll: true, SignalOnViolation: true},
	}
	for _, p := range got {
		if !reflect.DeepEqual(p, want[p.Name]) {
			t.Errorf("default %s = %+v, want %+v", p.Name, p, want[p.Name])
		}
	}
	// Fresh copies: changing one does not change the next call's.
	got[0].BlockedActions[0] = "changed"
	if Defaults()[0].BlockedActions[0] != "file_write" {
		t.Fatal("Defaults shares its slices between calls")
	}
}
