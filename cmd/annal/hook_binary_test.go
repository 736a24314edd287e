package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// binaryHook runs the hook of agent through a real annal binary, as the
// coding agent does: input on stdin, and what it printed on stdout and
// stderr, and its exit code, back.
type binaryHook struct {
	*hookEnv
	bin string
}

func newBinaryHook(t *testing.T) *binaryHook {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "annal")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building annal: %v\n%s", err, out)
	}
	return &binaryHook{hookEnv: newHookEnv(t), bin: bin}
}

func (b *binaryHook) run(t *testing.T, agent, input string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if !json.Valid([]byte(input)) && !strings.HasPrefix(input, "not json") {
		t.Fatalf("the test's payload is not JSON: %s", input)
	}
	cmd := exec.Command(b.bin, append([]string{"--server", b.url, "--credential", b.agentCred, "hook", agent, "--state-dir", b.state}, args...)...)
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// lastIntent is the log's newest entry, which must be an execute intent on
// target whose input is the content id of input.
func (b *binaryHook) lastIntent(t *testing.T, target, input string) uint64 {
	t.Helper()
	index := logSizeOf(t, b.k) - 1
	ev := b.event(t, index)
	want, _, err := contentID(json.RawMessage(input))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Action.Type != event.Execute || ev.Action.Target != target || payloadOf(t, ev)["input_oid"] != want {
		t.Fatalf("entry %d: %+v %s, want an intent on %s with input %s", index, ev.Action, ev.Action.Payload, target, want)
	}
	return index
}

// lastResult checks that the log's newest entry is the result of intent,
// its output the content id of output.
func (b *binaryHook) lastResult(t *testing.T, intent uint64, output string) {
	t.Helper()
	ev := b.event(t, logSizeOf(t, b.k)-1)
	want, _, _ := contentID(json.RawMessage(output))
	if p := payloadOf(t, ev); p["intent"] != float64(intent) || p["output_oid"] != want {
		t.Fatalf("the result: %s, want intent %d output %s", ev.Action.Payload, intent, want)
	}
}

// Codex's hooks, with payloads as Codex's hook schema writes them
// (codex-rs/hooks/schema: session_id, turn_id, transcript_path, cwd, model,
// permission_mode, tool_name, tool_input, tool_use_id, tool_response),
// through the real binary: Bash and apply_patch are intents and results; a
// forbidden command is denied with a reason (Codex accepts only "deny", and
// needs its reason); input that is not Codex's exits 2 with the reason on
// stderr, which Codex needs to block.
func TestHook_CodexThroughTheBinary(t *testing.T) {
	b := newBinaryHook(t)
	const common = `"session_id":"019a-s","turn_id":"turn-1","transcript_path":null,"cwd":"/repo","model":"gpt-5-codex","permission_mode":"default"`
	stdout, stderr, code := b.run(t, "codex", `{`+common+`,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"go test ./..."},"tool_use_id":"call_1"}`)
	if code != 0 || stdout != "" {
		t.Fatalf("an allowed Bash call: exit %d, printed %q %q (Codex refuses an \"allow\")", code, stdout, stderr)
	}
	intent := b.lastIntent(t, "codex/Bash", `{"command":"go test ./..."}`)
	if _, stderr, code := b.run(t, "codex", `{`+common+`,"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"go test ./..."},"tool_use_id":"call_1","tool_response":"ok\n"}`); code != 0 {
		t.Fatalf("PostToolUse: exit %d: %s", code, stderr)
	}
	b.lastResult(t, intent, `"ok\n"`)

	patch := `{"command":"*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"}`
	if stdout, _, code := b.run(t, "codex", `{`+common+`,"hook_event_name":"PreToolUse","tool_name":"apply_patch","tool_input":`+patch+`,"tool_use_id":"call_2"}`); code != 0 || stdout != "" {
		t.Fatalf("apply_patch: exit %d, %q", code, stdout)
	}
	b.lastIntent(t, "codex/apply_patch", patch)

	before := logSizeOf(t, b.k)
	stdout, _, code = b.run(t, "codex", `{`+common+`,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git push --force"},"tool_use_id":"call_3"}`)
	var d map[string]any
	json.Unmarshal([]byte(stdout), &d)
	if decision, reason := decisionOf(d); code != 0 || decision != "deny" || !strings.Contains(reason, "no-force-push") {
		t.Fatalf("a forbidden command: exit %d, %q", code, stdout)
	}
	if logSizeOf(t, b.k) != before+1 {
		t.Fatalf("a denied call wrote %d entries, want its denial", logSizeOf(t, b.k)-before)
	}
	before = logSizeOf(t, b.k)
	if _, stderr, code := b.run(t, "codex", `not json`); code != 2 || !strings.Contains(stderr, "not Codex's JSON") {
		t.Fatalf("bad input: exit %d, stderr %q", code, stderr)
	}
	if logSizeOf(t, b.k) != before {
		t.Fatal("bad input wrote to the log")
	}
}

// Claude Code's hooks through the real binary: allowed says nothing, a
// forbidden call is denied with the kernel's reason, bad input exits 2
// with the reason on stderr.
func TestHook_ClaudeCodeThroughTheBinary(t *testing.T) {
	b := newBinaryHook(t)
	const common = `"session_id":"abc","transcript_path":"/home/u/.claude/projects/p/abc.jsonl","cwd":"/repo","permission_mode":"default"`
	write := `{"file_path":"/repo/a.txt","content":"hi"}`
	if stdout, stderr, code := b.run(t, "claude-code", `{`+common+`,"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":`+write+`,"tool_use_id":"toolu_01"}`); code != 0 || stdout != "" {
		t.Fatalf("Write: exit %d, %q %q", code, stdout, stderr)
	}
	intent := b.lastIntent(t, "claude-code/Write", write)
	response := `{"filePath":"/repo/a.txt","success":true}`
	if _, stderr, code := b.run(t, "claude-code", `{`+common+`,"hook_event_name":"PostToolUse","tool_name":"Write","tool_input":`+write+`,"tool_use_id":"toolu_01","tool_response":`+response+`}`); code != 0 {
		t.Fatalf("PostToolUse: exit %d %s", code, stderr)
	}
	b.lastResult(t, intent, response)
	stdout, _, _ := b.run(t, "claude-code", `{`+common+`,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git push --force"},"tool_use_id":"toolu_02"}`)
	var d map[string]any
	json.Unmarshal([]byte(stdout), &d)
	if decision, reason := decisionOf(d); decision != "deny" || !strings.Contains(reason, "no-force-push") {
		t.Fatalf("a forbidden command: %q", stdout)
	}
	if _, stderr, code := b.run(t, "claude-code", `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"../x"}`); code != 2 || stderr == "" {
		t.Fatalf("bad input: exit %d, stderr %q", code, stderr)
	}
	if _, _, code := b.run(t, "claude-code", `{}`, "--on-hold", "ask"); code != 1 {
		t.Fatalf("--on-hold ask: exit %d, want a refusal (a held call is answered in annal)", code)
	}
}

// cursorAnswer is what the hook printed for Cursor.
func cursorAnswer(t *testing.T, stdout string) cursorPermission {
	t.Helper()
	var p cursorPermission
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatalf("the hook printed %q", stdout)
	}
	return p
}

// Cursor's hooks, with payloads as Cursor documents them (hooks.json
// version 1: conversation_id, generation_id, workspace_roots and each
// event's fields), through the real binary: a shell command and an MCP call
// (its tool_input a string of JSON) are intents and results, paired with no
// call id; a forbidden command and a held MCP call are denied with the
// reason for the model; a read is an observe; a generic tool call pairs by
// tool_use_id; an edit is recorded after the fact; bad input is denied.
func TestHook_CursorThroughTheBinary(t *testing.T) {
	b := newBinaryHook(t)
	const common = `"conversation_id":"conv-1","generation_id":"gen-1","workspace_roots":["/repo"],"cursor_version":"2.0.77"`
	shell := `"command":"npm test","cwd":"/repo"`
	stdout, stderr, code := b.run(t, "cursor", `{`+common+`,"hook_event_name":"beforeShellExecution",`+shell+`}`)
	if p := cursorAnswer(t, stdout); code != 0 || p.Permission != "allow" {
		t.Fatalf("an allowed command: exit %d, %q %q", code, stdout, stderr)
	}
	intent := b.lastIntent(t, "cursor/Shell", `{`+shell+`}`)
	if _, stderr, code := b.run(t, "cursor", `{`+common+`,"hook_event_name":"afterShellExecution",`+shell+`,"output":"ok","duration":150}`); code != 0 {
		t.Fatalf("afterShellExecution: exit %d %s", code, stderr)
	}
	b.lastResult(t, intent, `{"output":"ok"}`)

	stdout, _, _ = b.run(t, "cursor", `{`+common+`,"hook_event_name":"beforeShellExecution","command":"git push --force","cwd":"/repo"}`)
	if p := cursorAnswer(t, stdout); p.Permission != "deny" || !strings.Contains(p.AgentMessage, "no-force-push") {
		t.Fatalf("a forbidden command: %q", stdout)
	}

	mcp := `"tool_name":"query","tool_input":"{\"sql\": \"select 1\"}","url":"http://localhost:3000"`
	if p := cursorAnswer(t, first(b.run(t, "cursor", `{`+common+`,"hook_event_name":"beforeMCPExecution",`+mcp+`}`))); p.Permission != "allow" {
		t.Fatalf("an MCP call: %+v", p)
	}
	intent = b.lastIntent(t, "cursor/mcp/query", `{"sql":"select 1"}`)
	if _, stderr, code := b.run(t, "cursor", `{`+common+`,"hook_event_name":"afterMCPExecution",`+mcp+`,"result_json":"{\"rows\":[[1]]}","duration":25}`); code != 0 {
		t.Fatalf("afterMCPExecution: exit %d %s", code, stderr)
	}
	b.lastResult(t, intent, `{"rows":[[1]]}`)

	p := cursorAnswer(t, first(b.run(t, "cursor", `{`+common+`,"hook_event_name":"beforeMCPExecution","tool_name":"deploy","tool_input":{}}`, "--on-hold", "deny")))
	if p.Permission != "deny" || !strings.Contains(p.AgentMessage, "annal holds approve") {
		t.Fatalf("a held MCP call: %+v", p)
	}

	if p := cursorAnswer(t, first(b.run(t, "cursor", `{`+common+`,"hook_event_name":"beforeReadFile","file_path":"/repo/.env","content":"X=1"}`))); p.Permission != "allow" {
		t.Fatalf("a read: %+v", p)
	}
	if ev := b.event(t, logSizeOf(t, b.k)-1); ev.Action.Type != event.Observe || ev.Action.Target != "cursor/Read" {
		t.Fatalf("a read's entry: %+v", ev.Action)
	}

	write := `{"file_path":"/repo/a.ts","contents":"x"}`
	if p := cursorAnswer(t, first(b.run(t, "cursor", `{`+common+`,"hook_event_name":"preToolUse","tool_name":"Write","tool_input":`+write+`,"tool_use_id":"tool_9"}`))); p.Permission != "allow" {
		t.Fatalf("preToolUse: %+v", p)
	}
	intent = b.lastIntent(t, "cursor/Write", write)
	if _, stderr, code := b.run(t, "cursor", `{`+common+`,"hook_event_name":"postToolUse","tool_name":"Write","tool_input":`+write+`,"tool_use_id":"tool_9","tool_output":"{\"ok\":true}"}`); code != 0 {
		t.Fatalf("postToolUse: exit %d %s", code, stderr)
	}
	b.lastResult(t, intent, `{"ok":true}`)

	if _, stderr, code := b.run(t, "cursor", `{`+common+`,"hook_event_name":"afterFileEdit","file_path":"/repo/a.ts","edits":[{"old_string":"a","new_string":"b"}]}`); code != 0 {
		t.Fatalf("afterFileEdit: exit %d %s", code, stderr)
	}
	if ev := b.event(t, logSizeOf(t, b.k)-1); ev.Action.Type != event.Mutate || ev.Action.Target != "cursor/Edit" {
		t.Fatalf("an edit's entry: %+v", ev.Action)
	}

	before := logSizeOf(t, b.k)
	stdout, _, code = b.run(t, "cursor", `not json`)
	if p := cursorAnswer(t, stdout); code != 2 || p.Permission != "deny" {
		t.Fatalf("bad input: exit %d, %q", code, stdout)
	}
	if stdout, _, code := b.run(t, "cursor", `{`+common+`,"hook_event_name":"beforeSubmitPrompt","prompt":"hi"}`); code != 0 || stdout != "" {
		t.Fatalf("an event the hook does not answer: exit %d, %q", code, stdout)
	}
	if logSizeOf(t, b.k) != before {
		t.Fatal("bad input or an unanswered event wrote to the log")
	}
}

func first(stdout, _ string, _ int) string { return stdout }

// FuzzCursorHookInput: whatever is on stdin, the Cursor hook's reader
// answers an input whose call names a safe state file and target, or an
// error.
func FuzzCursorHookInput(f *testing.F) {
	for _, seed := range []string{
		`{"hook_event_name":"beforeShellExecution","conversation_id":"c","generation_id":"g","command":"ls","cwd":"/"}`,
		`{"hook_event_name":"beforeMCPExecution","tool_name":"q","tool_input":"{\"a\":1}"}`,
		`{"hook_event_name":"postToolUse","tool_name":"MCP:x","tool_use_id":"t1","tool_output":"[]"}`,
		`{"hook_event_name":"afterFileEdit","file_path":"/a","edits":[]}`, `{}`, `[]`, `{"hook_event_name":"preToolUse","tool_name":"../x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := readCursorInput(bytes.NewReader(raw))
		if err != nil {
			return
		}
		call, _, ok := in.call()
		if !ok {
			return
		}
		if call.key != "" && !toolUseID.MatchString(call.key) {
			t.Fatalf("state key %q taken", call.key)
		}
		if err := event.ValidateTarget(call.target); err != nil {
			t.Fatalf("target %q: %v", call.target, err)
		}
	})
}

// The README's hook configurations are JSON each agent reads, and
// name this command for the events it answers.
func TestREADMEHookSnippets(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"annal hook claude-code": {"PreToolUse", "PostToolUse"},
		"annal hook codex":       {"PreToolUse", "PostToolUse"},
		"annal hook cursor":      {"beforeShellExecution", "afterShellExecution", "beforeMCPExecution", "afterMCPExecution", "beforeReadFile"},
	}
	found := map[string]bool{}
	for _, block := range strings.Split(string(readme), "```json\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if !strings.Contains(block, "annal hook ") {
			continue
		}
		var config struct {
			Hooks map[string]json.RawMessage `json:"hooks"`
		}
		if err := json.Unmarshal([]byte(block), &config); err != nil {
			t.Fatalf("a hook snippet is not JSON: %v\n%s", err, block)
		}
		for command, events := range want {
			if !strings.Contains(block, `"`+command+`"`) {
				continue
			}
			found[command] = true
			for _, ev := range events {
				if !strings.Contains(string(config.Hooks[ev]), command) {
					t.Errorf("the snippet for %s does not run it on %s", command, ev)
				}
			}
		}
	}
	for command := range want {
		if !found[command] {
			t.Errorf("the README has no configuration for %s", command)
		}
	}
}
