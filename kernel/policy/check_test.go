package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustCompile(t testing.TB, p Policy) *Compiled {
	t.Helper()
	c, err := Compile(p)
	if err != nil {
		t.Fatalf("Compile(%s): %v", p.Name, err)
	}
	return c
}

func defaultsCompiled(t testing.TB) map[string]*Compiled {
	out := map[string]*Compiled{}
	for _, p := range Defaults() {
		out[p.Name] = mustCompile(t, p)
	}
	return out
}

func TestAgentOS_PolicyBlockedAction(t *testing.T) {
	d := defaultsCompiled(t)
	for _, tc := range []struct {
		policy string
		names  []string
		want   string // blocked name, "" for allowed
	}{
		{"read_only", []string{"file_write"}, "file_write"},
		{"read_only", []string{"mutate", "notes.save", "delete"}, "delete"},
		{"read_only", []string{"delete", "file_write"}, "delete"}, // first name given wins
		{"read_only", []string{"File_Write"}, ""},                 // exact, case-sensitive
		{"read_only", []string{"file_write "}, ""},
		{"read_only", []string{"file_writer"}, ""},
		{"read_only", []string{"read"}, ""},
		{"read_only", nil, ""},
		{"strict", []string{"mutate", "shell_exec"}, "shell_exec"},
		{"no_pii", []string{"shell_exec"}, ""},
		{"audit", []string{"delete", "shell_exec"}, ""},
	} {
		v := d[tc.policy].Check(tc.names, []byte(`{}`))
		switch {
		case tc.want == "" && v != nil:
			t.Errorf("%s.Check(%q) = %v, want allowed", tc.policy, tc.names, v)
		case tc.want != "" && v == nil:
			t.Errorf("%s.Check(%q) allowed, want %q blocked", tc.policy, tc.names, tc.want)
		case tc.want != "" && (v.Policy != tc.policy || v.Rule != RuleBlockedAction || !strings.Contains(v.Detail, `"`+tc.want+`"`)):
			t.Errorf("%s.Check(%q) = %+v, want %s blocked_action on %q", tc.policy, tc.names, v, tc.policy, tc.want)
		}
	}
}

func TestAgentOS_PolicyBlockedPattern(t *testing.T) {
	d := defaultsCompiled(t)
	for _, tc := range []struct {
		policy, payload string
		want            string // the pattern that blocks, "" for allowed
	}{
		{"no_pii", `{"q":"my ssn is 123"}`, `\bssn\b`},
		{"no_pii", `{"q":"My SSN is 123"}`, `\bssn\b`}, // case-insensitive
		{"no_pii", `{"ssn":"x"}`, `\bssn\b`},           // keys are in the JSON text too
		{"no_pii", `{"q":"lessnumbers"}`, ""},          // \b: inside a word
		{"no_pii", `{"q":"Social Security"}`, `\bsocial.security\b`},
		{"no_pii", `{"q":"social_security"}`, `\bsocial.security\b`},
		{"no_pii", `{"q":"CREDIT-CARD"}`, `\bcredit.card\b`},
		{"no_pii", `{"password":"hunter2"}`, `\bpassword\b`},
		{"no_pii", `{"q":"passwords"}`, ""},
		{"no_pii", `{"q":"ssn password"}`, `\bssn\b`}, // the policy's order
		{"strict", `{"sql":"DROP   TABLE users"}`, `\bdrop\s+table\b`},
		{"strict", `{"sql":"drop tables"}`, ""},
		{"strict", `{"sql":"drop\ntable"}`, ""}, // JSON text: the newline is `\n`
		{"strict", `{"sql":"Delete From t"}`, `\bdelete\s+from\b`},
		{"strict", `{"sql":"x'; -- y"}`, `;\s*--`},
		{"strict", `{"sql":"' OR '1'='1"}`, `'\s*or\s*'1'\s*=\s*'1`},
		{"strict", `{"sql":"select 1"}`, ""},
		{"read_only", `{"q":"ssn drop table"}`, ""},
		{"audit", `{"q":"ssn drop table"}`, ""},
	} {
		v := d[tc.policy].Check([]string{"mutate"}, []byte(tc.payload))
		switch {
		case tc.want == "" && v != nil:
			t.Errorf("%s on %s = %v, want allowed", tc.policy, tc.payload, v)
		case tc.want != "" && v == nil:
			t.Errorf("%s on %s allowed, want blocked by %q", tc.policy, tc.payload, tc.want)
		case tc.want != "" && (v.Rule != RuleBlockedPattern || v.Policy != tc.policy || v.Detail != `payload matches pattern "`+strings.ReplaceAll(tc.want, `\`, `\\`)+`"`):
			t.Errorf("%s on %s = %+v, want blocked_pattern %q", tc.policy, tc.payload, v, tc.want)
		}
	}
}

// TestAgentOS_PolicyActionBeforePattern: a policy with both rules reports
// the blocked action first.
func TestAgentOS_PolicyActionBeforePattern(t *testing.T) {
	v := defaultsCompiled(t)["strict"].Check([]string{"eval"}, []byte(`{"sql":"drop table x"}`))
	if v == nil || v.Rule != RuleBlockedAction {
		t.Fatalf("Check = %+v, want blocked_action", v)
	}
}

func TestAgentOS_PolicyEvaluateOrder(t *testing.T) {
	d := defaultsCompiled(t)
	payload := []byte(`{"q":"password; -- drop table"}`)
	for _, tc := range []struct {
		order []string
		names []string
		want  string // policy name, "" for allowed
		rule  string
	}{
		{[]string{"read_only", "no_pii", "strict"}, []string{"mutate"}, "no_pii", RuleBlockedPattern},
		{[]string{"strict", "no_pii"}, []string{"mutate"}, "strict", RuleBlockedPattern},
		{[]string{"no_pii", "read_only"}, []string{"delete"}, "no_pii", RuleBlockedPattern},
		{[]string{"read_only", "no_pii"}, []string{"delete"}, "read_only", RuleBlockedAction},
		{[]string{"audit", "read_only"}, []string{"mutate"}, "", ""},
		{nil, []string{"delete"}, "", ""},
	} {
		var cs []*Compiled
		for _, n := range tc.order {
			cs = append(cs, d[n])
		}
		v := Evaluate(cs, tc.names, payload)
		if tc.want == "" {
			if v != nil {
				t.Errorf("Evaluate(%v) = %v, want allowed", tc.order, v)
			}
			continue
		}
		if v == nil || v.Policy != tc.want || v.Rule != tc.rule {
			t.Errorf("Evaluate(%v, %v) = %+v, want %s %s", tc.order, tc.names, v, tc.want, tc.rule)
		}
	}
}

// TestAgentOS_PolicyEvaluateFailsClosed: a nil policy blocks instead of
// being skipped as the seed skips an unknown name.
func TestAgentOS_PolicyEvaluateFailsClosed(t *testing.T) {
	d := defaultsCompiled(t)
	v := Evaluate([]*Compiled{d["audit"], nil}, []string{"read"}, []byte(`{}`))
	if v == nil || v.Rule != RuleMissingPolicy {
		t.Fatalf("Evaluate with a nil policy = %+v, want missing_policy", v)
	}
}

func TestAgentOS_PolicyViolationError(t *testing.T) {
	v := defaultsCompiled(t)["read_only"].Check([]string{"delete"}, nil)
	var err error = v
	if got, want := err.Error(), `policy read_only: blocked_action: action "delete" is blocked`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	v = defaultsCompiled(t)["no_pii"].Check(nil, []byte(`{"ssn":1}`))
	if !strings.Contains(v.Error(), "no_pii") || !strings.Contains(v.Error(), RuleBlockedPattern) || strings.Contains(v.Error(), "1}") {
		t.Fatalf("Error() = %q: want the policy and rule, and no payload text", v.Error())
	}
}

func TestAgentOS_PolicyCompileRefusesInvalid(t *testing.T) {
	if _, err := Compile(Policy{Name: "x", BlockedPatterns: []string{"a*"}}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("Compile of an empty-matching pattern: %v", err)
	}
}

// TestAgentOS_PolicyCompiledImmutable: changing the Policy given to Compile
// does not change what Check does.
func TestAgentOS_PolicyCompiledImmutable(t *testing.T) {
	p := Policy{Name: "x", BlockedActions: []string{"delete"}, BlockedPatterns: []string{"ssn"}}
	c := mustCompile(t, p)
	p.BlockedActions[0] = "other"
	p.BlockedPatterns[0] = "other"
	if v := c.Check([]string{"delete"}, nil); v == nil {
		t.Fatal("changing the caller's Policy changed the compiled actions")
	}
	if v := c.Check(nil, []byte("ssn")); v == nil || !strings.Contains(v.Detail, `"ssn"`) {
		t.Fatalf("changing the caller's Policy changed the compiled patterns: %+v", v)
	}
}

// TestAgentOS_PolicyLinearTime: a pattern that backtracks exponentially in
// Python's re runs in linear time under RE2.
func TestAgentOS_PolicyLinearTime(t *testing.T) {
	c := mustCompile(t, Policy{Name: "x", BlockedPatterns: []string{`(a+)+b`, `(a|aa)+c`}})
	// The b and the c, after an x, match nothing, but let both patterns
	// past their prefilters (which clear a payload without them).
	payload := []byte(strings.Repeat("a", 1<<16) + "xbxc")
	if v := c.Check(nil, payload); v != nil {
		t.Fatalf("Check = %v, want allowed", v)
	}
}

func payload1K() []byte {
	var b strings.Builder
	b.WriteString(`{"body":"`)
	for b.Len() < 1024-2 {
		b.WriteString("the quick brown fox jumps over the lazy dog ")
	}
	s := b.String()[:1024-2] + `"}`
	return []byte(s)
}

func BenchmarkCheck(b *testing.B) {
	d := defaultsCompiled(b)
	payload := payload1K()
	if len(payload) != 1024 {
		b.Fatalf("payload is %d bytes", len(payload))
	}
	names := []string{"mutate", "notes.save", "workspace/notes/1"}
	// A near miss holds one of no_pii's words inside a longer one: its
	// pattern's prefilter lets it through, and the regular expression runs.
	nearMiss := slices.Clone(payload)
	copy(nearMiss[500:], "passwords")
	for _, c := range []struct {
		name, policy string
		payload      []byte
	}{{"strict", "strict", payload}, {"no_pii", "no_pii", payload}, {"no_pii, a near miss", "no_pii", nearMiss}} {
		p := d[c.policy]
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.payload)))
			for b.Loop() {
				if v := p.Check(names, c.payload); v != nil {
					b.Fatal(v)
				}
			}
		})
	}
}
