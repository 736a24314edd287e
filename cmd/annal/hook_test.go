package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel/event"
)

// hookEnv is a kernel with an agent the coding agents' hooks act as:
// Claude Code's, Codex's and Cursor's tools and the MCP server fs's
// allowed, fs's move_file and Cursor's MCP tool deploy held for a human,
// force pushes forbidden by a policy, and nothing else.
type hookEnv struct {
	*execEnv
	state string
}

func newHookEnv(t *testing.T) *hookEnv {
	t.Helper()
	e := newExecEnv(t)
	root := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, append([]string{"--server", e.url, "--credential", e.rootCred}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := root("agents", "create", "--name", "coder", "--purpose", "a coding agent", "--trust", "0.8", "--energy", "10000",
		"--grant", "claude-code/**:execute,observe", "--grant", "codex/**:execute", "--grant", "cursor/**:execute,observe,mutate",
		"--grant", "mcp/fs/**:execute")
	var agent api.Agent
	if err := json.Unmarshal([]byte(out), &agent); err != nil {
		t.Fatal(err)
	}
	root("envelopes", "issue", "--holder", agent.ID, "--budget", "5000", "--grant", "claude-code/**:execute,observe",
		"--grant", "codex/**:execute", "--grant", "cursor/**:execute,observe,mutate", "--grant", "mcp/fs/**:execute",
		"--hold-on", "mcp/fs/move_file:execute", "--hold-on", "cursor/mcp/deploy:execute")
	spec := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(spec, []byte(`{"name":"no-force-push","blocked_patterns":["push\\s+--force"],"signal_on_violation":false}`), 0o600)
	root("policies", "set", "no-force-push", "--spec", "@"+spec)
	root("policies", "attach", "no-force-push", "--agent", agent.ID)
	e.agentCred = agent.Credential
	return &hookEnv{execEnv: e, state: t.TempDir()}
}

// hook runs annal hook claude-code with input on stdin and returns what it
// printed and the exit code.
func (h *hookEnv) hook(t *testing.T, input map[string]any, args ...string) (map[string]any, int) {
	t.Helper()
	raw, _ := json.Marshal(input)
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(bytes.NewReader(raw))
	cmd.SetArgs(append([]string{"--server", h.url, "--credential", h.agentCred, "hook", "claude-code", "--state-dir", h.state}, args...))
	err := cmd.Execute()
	code := 0
	if err != nil {
		code = 1
		if exit, ok := err.(*exitError); ok {
			code = exit.code
		}
		t.Logf("annal hook claude-code: %v", err) // what a failing assertion below needs to say why
	}
	var decision map[string]any
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &decision); err != nil {
			t.Fatalf("the hook printed %q", out.String())
		}
	}
	return decision, code
}

func preInput(tool, id string, input map[string]any) map[string]any {
	return map[string]any{"session_id": "s-1", "hook_event_name": "PreToolUse", "tool_name": tool, "tool_use_id": id, "tool_input": input}
}

func postInput(tool, id string, input, response map[string]any) map[string]any {
	m := preInput(tool, id, input)
	m["hook_event_name"], m["tool_response"] = "PostToolUse", response
	return m
}

func decisionOf(d map[string]any) (string, string) {
	out, _ := d["hookSpecificOutput"].(map[string]any)
	decision, _ := out["permissionDecision"].(string)
	reason, _ := out["permissionDecisionReason"].(string)
	return decision, reason
}

// Claude Code's PreToolUse and PostToolUse through annal hook claude-code:
// an allowed call is an execute intent before it runs and its result
// after, with the input's and response's content ids; a call the policy
// forbids is blocked with the kernel's reason and never gets a result; a
// held one is blocked until a human approves (--on-hold deny), or waits
// for the answer (--on-hold wait); a read-only tool is an observe; bad
// input is refused with exit 2 (Claude Code blocks the call).
func TestHook_ClaudeCodePreAndPostToolUse(t *testing.T) {
	h := newHookEnv(t)
	bash := map[string]any{"command": "go test ./...", "description": "run the tests"}
	if d, code := h.hook(t, preInput("Bash", "toolu_1", bash)); code != 0 || d != nil {
		t.Fatalf("an allowed call: exit %d, printed %v", code, d)
	}
	intent, err := loadIntent(h.state, "toolu_1")
	if err != nil {
		t.Fatal(err)
	}
	wantInput, _, _ := contentID(mustJSON(t, bash))
	ev := h.event(t, intent.Index)
	if ev.Action.Type != event.Execute || ev.Action.Target != "claude-code/Bash" || payloadOf(t, ev)["input_oid"] != wantInput {
		t.Fatalf("the intent: %+v %s", ev.Action, ev.Action.Payload)
	}
	response := map[string]any{"stdout": "ok", "stderr": "", "interrupted": false}
	if _, code := h.hook(t, postInput("Bash", "toolu_1", bash, response)); code != 0 {
		t.Fatalf("PostToolUse: exit %d", code)
	}
	wantOutput, _, _ := contentID(mustJSON(t, response))
	result := h.event(t, logSizeOf(t, h.k)-1)
	if p := payloadOf(t, result); p["intent"] != float64(intent.Index) || p["output_oid"] != wantOutput || p["exit_code"] != float64(0) {
		t.Fatalf("the result: %s", result.Action.Payload)
	}
	if _, err := os.Stat(intentFile(h.state, "toolu_1")); !os.IsNotExist(err) {
		t.Fatalf("the intent's state outlived its result: %v", err)
	}

	// The policy forbids the command: blocked with the kernel's reason.
	before := logSizeOf(t, h.k)
	d, code := h.hook(t, preInput("Bash", "toolu_2", map[string]any{"command": "git push --force origin main"}))
	if decision, reason := decisionOf(d); code != 0 || decision != "deny" || !strings.Contains(reason, "no-force-push") {
		t.Fatalf("a forbidden call: exit %d, %v", code, d)
	}
	if _, err := loadIntent(h.state, "toolu_2"); !os.IsNotExist(err) {
		t.Fatal("a denied call kept an intent")
	}
	if logSizeOf(t, h.k) != before+1 { // the action.denied, and no intent
		t.Fatalf("a denied call wrote %d entries", logSizeOf(t, h.k)-before)
	}

	// Held: --on-hold deny blocks at once, naming the hold.
	move := map[string]any{"source": "/a", "destination": "/b"}
	d, _ = h.hook(t, preInput("mcp__fs__move_file", "toolu_3", move), "--on-hold", "deny")
	if decision, reason := decisionOf(d); decision != "deny" || !strings.Contains(reason, "annal holds approve") {
		t.Fatalf("a held call with --on-hold deny: %v", d)
	}
	// --on-hold wait: the call is allowed once a human approves.
	hold := waitForHold(t, h.execEnv)
	if _, err := runCLI(t, "--server", h.url, "--credential", h.rootCred, "holds", "reject", hold.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan map[string]any, 1)
	go func() {
		d, _ := h.hook(t, preInput("mcp__fs__move_file", "toolu_4", move), "--on-hold", "wait")
		done <- d
	}()
	hold = waitForHold(t, h.execEnv)
	select {
	case d := <-done:
		t.Fatalf("a held call was answered before a human did: %v", d)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := runCLI(t, "--server", h.url, "--credential", h.rootCred, "holds", "approve", hold.ID); err != nil {
		t.Fatal(err)
	}
	if d := <-done; d != nil {
		t.Fatalf("an approved call: %v", d)
	}
	if in, err := loadIntent(h.state, "toolu_4"); err != nil || in.Target != "mcp/fs/move_file" || in.HoldID != hold.ID {
		t.Fatalf("the approved intent: %+v %v", in, err)
	}

	// A read-only tool is an observe, and has no result to record.
	before = logSizeOf(t, h.k)
	if d, code := h.hook(t, preInput("Read", "toolu_5", map[string]any{"file_path": "/x"})); code != 0 || d != nil {
		t.Fatalf("Read: exit %d, %v", code, d)
	}
	if ev := h.event(t, logSizeOf(t, h.k)-1); logSizeOf(t, h.k) != before+1 || ev.Action.Type != event.Observe || ev.Action.Target != "claude-code/Read" {
		t.Fatalf("Read's entry: %+v", ev.Action)
	}

	// Input that is not Claude Code's: exit 2, nothing written.
	before = logSizeOf(t, h.k)
	for _, bad := range []map[string]any{
		preInput("", "toolu_6", nil),
		preInput("Bash", "../../etc/passwd", bash),
	} {
		if _, code := h.hook(t, bad); code != 2 {
			t.Errorf("bad input %v: exit %d, want 2", bad, code)
		}
	}
	if logSizeOf(t, h.k) != before {
		t.Fatal("bad input wrote to the log")
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// FuzzHookInput: whatever Claude Code (or anyone) puts on stdin, the
// hook's reader answers an input whose tool and call id are safe to use
// (a target segment, a file name) or an error.
func FuzzHookInput(f *testing.F) {
	for _, seed := range []string{
		`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"toolu_1","tool_input":{"command":"ls"}}`,
		`{"hook_event_name":"PostToolUse","tool_name":"mcp__fs__read","tool_use_id":"x","tool_response":{"is_error":true}}`,
		`{"hook_event_name":"Stop"}`, `{}`, `[]`, `{"tool_use_id":"../x","hook_event_name":"PreToolUse","tool_name":"Bash"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := readHookInput(bytes.NewReader(raw), "Claude Code")
		if err != nil || (in.Event != "PreToolUse" && in.Event != "PostToolUse") {
			return
		}
		if !toolUseID.MatchString(in.ToolUseID) || strings.ContainsAny(in.ToolUseID, "/.") {
			t.Fatalf("tool_use_id %q taken", in.ToolUseID)
		}
		if in.ToolName == "" || strings.ContainsAny(in.ToolName, "\x00\n") {
			t.Fatalf("tool_name %q taken", in.ToolName)
		}
	})
}
