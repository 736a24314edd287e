package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

const sampleAgentsMD = "# AGENTS.md\n\nThis repository's agents follow these rules.\n\n" +
	"## Build and test\n\nRun `go test ./...` before committing.\n\n" +
	"## Blocked actions\n\n- `delete_file`\n- execute\n* `mcp/git/push`\n\n" +
	"## Blocked Patterns\n\n1. `\\bpassword\\b`\n2. `rm\\s+-rf`\n\nSome prose that is not a rule.\n\n" +
	"### Tools to allow\n\n- `read_text_file`\n- `mcp/fs/list_directory`\n\n```sh\nmake lint\n```\n"

func TestParseAgentsMD(t *testing.T) {
	p, notes, err := ParseAgentsMD([]byte(sampleAgentsMD), "repo-rules", "fs")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.BlockedActions, []string{"mcp/fs/delete_file", "execute", "mcp/git/push"}) ||
		!slices.Equal(p.BlockedPatterns, []string{`\bpassword\b`, `rm\s+-rf`}) ||
		!slices.Equal(p.AllowedTools, []string{"mcp/fs/read_text_file", "mcp/fs/list_directory"}) || p.Name != "repo-rules" {
		t.Fatalf("policy %+v", p)
	}
	var text []string
	for _, n := range notes {
		text = append(text, n.String())
	}
	joined := strings.Join(text, "\n")
	for _, want := range []string{`line 5: section "Build and test" is not a rule section`, `"Some prose that is not a rule."`,
		`taken as the tool mcp/fs/delete_file`, `allowed tool "read_text_file" is taken as mcp/fs/read_text_file`, "a code block in a rule section"} {
		if !strings.Contains(joined, want) {
			t.Errorf("notes lack %q:\n%s", want, joined)
		}
	}
	// The policy does what the file says.
	c, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	for names, blocked := range map[string]bool{"execute mcp/fs/write_file": true, "observe mcp/fs/read_text_file": false, "mutate mcp/fs/delete_file": true} {
		if v := c.Check(strings.Fields(names), []byte(`{"q":"ok"}`)); (v != nil) != blocked {
			t.Errorf("%s: %v", names, v)
		}
	}
	if v := c.Check([]string{"observe", "mcp/fs/read_text_file"}, []byte(`{"path":"password.txt"}`)); v == nil || v.Rule != RuleBlockedPattern {
		t.Errorf("pattern: %v", v)
	}
}

func TestParseAgentsMDRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"a tool with no server": "## Allowed tools\n- read_file\n",
		"a bad pattern":         "## Blocked patterns\n- `(?P=x)`\n",
		"an empty match":        "## Blocked patterns\n- `a*`\n",
		"no rules":              "# Notes\n\n## Style\n- tabs\n",
		"not UTF-8":             "## Blocked actions\n- \xff\n",
	} {
		if _, _, err := ParseAgentsMD([]byte(doc), "p", ""); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Without a server, a bare blocked action stays an action name.
	p, _, err := ParseAgentsMD([]byte("## Blocked actions\n- shell_exec\n"), "p", "")
	if err != nil || !slices.Equal(p.BlockedActions, []string{"shell_exec"}) {
		t.Errorf("%+v %v", p, err)
	}
}

// FuzzParseAgentsMD: any file is refused with ErrInvalidPolicy or turned
// into a policy that compiles; notes name lines of the file.
func FuzzParseAgentsMD(f *testing.F) {
	f.Add([]byte(sampleAgentsMD), "fs")
	f.Add([]byte("## Allowed tools\n- `mcp/a/b`\n## Blocked patterns\n- x+\n"), "")
	f.Add([]byte("```\n## Blocked actions\n- x\n```\n"), "s")
	f.Fuzz(func(t *testing.T, data []byte, server string) {
		p, notes, err := ParseAgentsMD(data, "fuzz", server)
		if err != nil {
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("error %v does not wrap ErrInvalidPolicy", err)
			}
			return
		}
		if _, err := Compile(p); err != nil {
			t.Fatalf("accepted a policy that does not compile: %v", err)
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, n := range notes {
			if n.Line < 1 || n.Line > lines {
				t.Fatalf("note on line %d of %d", n.Line, lines)
			}
		}
	})
}

// 002, "AGENTS.md Integration": parser.parse_directory(".agents/") reads a
// directory of instructions into one policy.
func TestSpec002_ParseDirectory(t *testing.T) {
	dir := fstest.MapFS{
		"agents.md":   {Data: []byte("# Agent\n\n## Blocked actions\n\n- `delete`\n- `shell_exec`\n\n## Style\n\nBe brief.\n")},
		"SECURITY.MD": {Data: []byte("## Blocked patterns\n\n- `(?i)\\bpassword\\b`\n\n## Blocked actions\n\n- `delete`\n")},
		"notes.md":    {Data: []byte("Nothing but prose.\n")},
		"image.png":   {Data: []byte{0x89, 'P', 'N', 'G'}},
		"sub/more.md": {Data: []byte("## Blocked actions\n\n- `never_read`\n")},
	}
	p, notes, err := ParseAgentsDir(dir, "agents-dir", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.BlockedActions, []string{"delete", "shell_exec"}) || !slices.Equal(p.BlockedPatterns, []string{`(?i)\bpassword\b`}) || p.Name != "agents-dir" {
		t.Fatalf("merged policy %+v", p)
	}
	var said []string
	for _, n := range notes {
		said = append(said, n.String())
	}
	joined := strings.Join(said, "\n")
	for _, want := range []string{"agents.md: line 8: section \"Style\"", "notes.md: states no rules"} {
		if !strings.Contains(joined, want) {
			t.Errorf("notes lack %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "more.md") || slices.Contains(p.BlockedActions, "never_read") {
		t.Error("a file in a subdirectory was read")
	}
	for name, bad := range map[string]fstest.MapFS{
		"no markdown": {"a.txt": {Data: []byte("## Blocked actions\n- x\n")}},
		"no rules":    {"a.md": {Data: []byte("# Hello\n")}},
		"bad pattern": {"a.md": {Data: []byte("## Blocked patterns\n- `(`\n")}},
		"too large":   {"a.md": {Data: []byte(strings.Repeat("x", MaxAgentsMD+1))}},
		"not utf-8":   {"a.md": {Data: []byte{0xff, 0xfe}}},
	} {
		if _, _, err := ParseAgentsDir(bad, "p", ""); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Two files of any bytes: ParseAgentsDir never panics, and what it accepts
// is a valid policy holding only rules one of the files states.
func FuzzParseAgentsDir(f *testing.F) {
	f.Add([]byte("## Blocked actions\n- `delete`\n"), []byte("## Blocked patterns\n- `x+`\n"))
	f.Add([]byte("# nothing\n"), []byte("## Allowed tools\n- `mcp/fs/read`\n"))
	f.Add([]byte{0xff}, []byte("## Blocked actions\n- a\n- a\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		p, _, err := ParseAgentsDir(fstest.MapFS{"a.md": {Data: a}, "b.md": {Data: b}}, "fuzz", "srv")
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted an invalid policy: %v", err)
		}
		pa, _, _ := readAgentsMD(a, "fuzz", "srv")
		pb, _, _ := readAgentsMD(b, "fuzz", "srv")
		for _, act := range p.BlockedActions {
			if !slices.Contains(pa.BlockedActions, act) && !slices.Contains(pb.BlockedActions, act) {
				t.Fatalf("blocked action %q is in neither file", act)
			}
		}
	})
}
