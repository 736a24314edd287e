package policy

import (
	"errors"
	"testing"
)

// allowed_tools closes the servers it names and only those.
func TestAllowedTools(t *testing.T) {
	c, err := Compile(Policy{Name: "repo", AllowedTools: []string{"mcp/fs/read_text_file", "mcp/fs/list_directory"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		names []string
		rule  string
	}{
		{[]string{"execute", "mcp/fs/read_text_file"}, ""},
		{[]string{"execute", "mcp/fs/write_file"}, RuleToolNotAllowed},
		{[]string{"observe", "mcp/other/write_file"}, ""},
		{[]string{"mutate", "workspace/notes.md"}, ""},
		{[]string{"execute", "mcp/fs/read_text_file/x"}, ""}, // not a tool target
	} {
		v := c.Check(tc.names, nil)
		if (v == nil) != (tc.rule == "") || (v != nil && v.Rule != tc.rule) {
			t.Errorf("%v: %v, want rule %q", tc.names, v, tc.rule)
		}
	}
	for _, bad := range [][]string{{"fs/read"}, {"mcp/fs"}, {"mcp//x"}, {"mcp/f s/x"}, {"mcp/fs/a/b"}, {"mcp/fs/x", "mcp/fs/x"}} {
		if err := (Policy{Name: "p", AllowedTools: bad}).Validate(); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("allowed tools %q: %v", bad, err)
		}
	}
	if _, err := Parse([]byte(`{"name":"p","allowed_tools":["mcp/fs/x"]}`)); err != nil {
		t.Errorf("parse: %v", err)
	}
}
