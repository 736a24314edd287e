package policy

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error wraps
// ErrInvalidPolicy, that what it accepts compiles and survives a round trip
// through JSON, and that Check on it never panics.
func FuzzParse(f *testing.F) {
	for _, p := range Defaults() {
		data, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, []byte(`{"q":"ssn drop table"}`))
	}
	for _, seed := range []string{
		`{"name":"x"}`, `{"Name":"x"}`, `{"name":"x","name":"x"}`, `{"name":"x"} `, `{"name":"x"}{}`,
		`{"name":"x","blocked_patterns":["a*"]}`, `{"name":"x","blocked_patterns":["(?-i)a"]}`,
		`{"name":"x","blocked_patterns":["(a+)+b"]}`, `{"name":"x","blocked_actions":["\u0000"]}`,
		`{"name":"x","blocked_actions":null,"blocked_patterns":null}`, `null`, `[]`, `"x"`, ``,
		`{"name":"x","Name":"y"}`, `{"name":"x","blocked_actionſ":["a"]}`, `{"name":"x","audit_all":true,"AUDIT_ALL":false}`,
		`{"name":"x","allowed_tools":["mcp/fs/read_file","mcp/fs/write_file"]}`, `{"name":"x","allowed_tools":["mcp/fs"]}`,
	} {
		f.Add([]byte(seed), []byte(`aaaaaaaab`))
	}
	f.Fuzz(func(t *testing.T, data, payload []byte) {
		p, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("Parse(%q): %v does not wrap ErrInvalidPolicy", data, err)
			}
			return
		}
		c, err := Compile(p)
		if err != nil {
			t.Fatalf("Parse(%q) accepts, Compile refuses: %v", data, err)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse(again)
		if err != nil || !reflect.DeepEqual(normal(p), normal(q)) {
			t.Fatalf("round trip of %q: %+v, %v", data, q, err)
		}
		if v := c.Check(p.BlockedActions, payload); len(p.BlockedActions) > 0 && (v == nil || v.Rule != RuleBlockedAction) {
			t.Fatalf("Check(%q) = %v: a blocked action went through", p.BlockedActions, v)
		}
		_ = c.Check(nil, payload)
	})
}

// normal maps empty lists to nil: JSON null and [] mean the same.
func normal(p Policy) Policy {
	if len(p.BlockedActions) == 0 {
		p.BlockedActions = nil
	}
	if len(p.BlockedPatterns) == 0 {
		p.BlockedPatterns = nil
	}
	return p
}
