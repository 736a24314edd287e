package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
)

// annal policies import turns an AGENTS.md's rules into a policy version in
// the log, says on stderr what it did not import, and the policy then
// refuses what the file forbids.
func TestPoliciesImportAgentsMD(t *testing.T) {
	url, credFile, _ := startServer(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "AGENTS.md")
	os.WriteFile(file, []byte("# Agents\n\n## Setup\nRun make.\n\n## Blocked actions\n- `mcp/fs/move_file`\n\n"+
		"## Blocked patterns\n- `\\bpassword\\b`\n\n## Tools to allow\n- `write_file`\n- `read_text_file`\n"), 0o644)
	run := func(args ...string) (string, string, error) {
		cmd := newRootCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"--server", url, "--credential-file", credFile}, args...))
		err := cmd.Execute()
		return out.String(), errOut.String(), err
	}
	if _, _, err := run("policies", "import", file); err == nil || !strings.Contains(err.Error(), "names no server") {
		t.Fatalf("a bare tool without --mcp-server: %v", err)
	}
	out, stderr, err := run("policies", "import", file, "--mcp-server", "fs", "--dry-run")
	if err != nil || !strings.Contains(out, `"allowed_tools"`) || !strings.Contains(stderr, `section "Setup" is not a rule section`) {
		t.Fatalf("dry run: %v\n%s\n%s", err, out, stderr)
	}
	// Seed 002: a violation ends the agent, unless --deny-only.
	if !strings.Contains(out, `"signal_on_violation": true`) {
		t.Fatalf("an imported policy does not end the agent that breaks it: %s", out)
	}
	if out, _, _ := run("policies", "import", file, "--mcp-server", "fs", "--dry-run", "--deny-only"); !strings.Contains(out, `"signal_on_violation": false`) {
		t.Fatalf("--deny-only: %s", out)
	}
	if lists, _, _ := run("policies", "list"); strings.Contains(lists, "agents-md") {
		t.Fatal("--dry-run defined the policy")
	}
	if _, _, err := run("policies", "import", file, "--mcp-server", "fs", "--name", "repo", "--deny-only"); err != nil {
		t.Fatal(err)
	}
	out, _, err = run("agents", "create", "--name", "a", "--purpose", "p", "--trust", "0.8", "--grant", "mcp/fs/**:execute", "--energy", "1000")
	if err != nil {
		t.Fatal(err)
	}
	var agent api.Agent
	json.Unmarshal([]byte(out), &agent)
	for _, args := range [][]string{
		{"envelopes", "issue", "--holder", agent.ID, "--budget", "500", "--grant", "mcp/fs/**:execute"},
		{"policies", "attach", "repo", "--agent", agent.ID},
	} {
		if _, _, err := run(args...); err != nil {
			t.Fatal(err)
		}
	}
	intent := `{"input_oid":"sha256:` + strings.Repeat("0", 64) + `","phase":"intent"}`
	submit := func(target string) error {
		_, err := runCLI(t, "--server", url, "--credential", agent.Credential, "submit", "--type", "execute", "--target", target, "--payload", intent)
		return err
	}
	if err := submit("mcp/fs/write_file"); err != nil {
		t.Errorf("an allowed tool: %v", err)
	}
	for _, forbidden := range []string{"mcp/fs/edit_file", "mcp/fs/move_file"} {
		if err := submit(forbidden); err == nil || !strings.Contains(err.Error(), "policy repo") {
			t.Errorf("%s: %v", forbidden, err)
		}
	}
}

// annal policies import DIR reads a directory of instructions (seed 002's
// parse_directory(".agents/")) into one policy version.
func TestPoliciesImportDirectory(t *testing.T) {
	url, credFile, _ := startServer(t)
	dir := filepath.Join(t.TempDir(), ".agents")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "agents.md"), []byte("## Blocked actions\n- `mcp/db/drop_table`\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "security.md"), []byte("## Blocked patterns\n- `(?i)\\bssn\\b`\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "style.md"), []byte("Write short sentences.\n"), 0o644)
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--server", url, "--credential-file", credFile, "policies", "import", dir, "--name", "agents-dir"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "style.md: states no rules") {
		t.Errorf("stderr does not name the file without rules:\n%s", errOut.String())
	}
	var listed bytes.Buffer
	cmd = newRootCommand()
	cmd.SetOut(&listed)
	cmd.SetArgs([]string{"--server", url, "--credential-file", credFile, "policies", "list"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"agents-dir", "mcp/db/drop_table", `\\bssn\\b`} {
		if !strings.Contains(listed.String(), want) {
			t.Errorf("policies list lacks %q:\n%s", want, listed.String())
		}
	}
}
