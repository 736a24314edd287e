package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/execute"
)

// annal hook claude-code: Claude Code's PreToolUse and PostToolUse hooks
// (JSON on stdin, as Claude Code documents its hooks) put every tool call
// of a coding agent through the kernel, as annal exec does a command:
//
//   - PreToolUse decides the call before it runs: an execute intent on
//     the call's target (a read-only tool is an observe), its input the
//     content id of the tool's input. Denied, the tool is blocked with the
//     kernel's reason (permissionDecision "deny", which Claude sees); held,
//     the hook waits for a human's answer in annal (--on-hold wait) or
//     blocks at once (--on-hold deny). Allowed, the hook says nothing, so
//     Claude Code's own permission rules still apply.
//   - PostToolUse records what the tool gave back as the intent's result.
//
// Claude Code's "ask" is not offered for a held call: it lets the tool
// run on the local user's yes, which the kernel never sees, so the log
// would show a held intent and a tool that ran anyway.
//
// A kernel that cannot be reached, or a hook input that cannot be read,
// blocks the call (fail closed).

// hookInput is what Claude Code sends a tool hook on stdin.
type hookInput struct {
	SessionID    string          `json:"session_id"`
	Event        string          `json:"hook_event_name"`
	ToolName     string          `json:"tool_name"`
	ToolInput    json.RawMessage `json:"tool_input"`
	ToolUseID    string          `json:"tool_use_id"`
	ToolResponse json.RawMessage `json:"tool_response"`
}

// maxHookInput bounds what the hook reads from stdin (a Write's content
// is in it).
const maxHookInput = 8 << 20

// readOnlyTools are Claude Code's tools that change nothing: an observe.
var readOnlyTools = map[string]bool{"Read": true, "Grep": true, "Glob": true, "LS": true, "NotebookRead": true,
	"WebSearch": true, "WebFetch": true, "TodoRead": true}

// toolUseID is the form of Claude Code's tool call ids, which name the
// hook's state files.
var toolUseID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// mcpTool is Claude Code's name of an MCP tool: mcp__<server>__<tool>.
var mcpTool = regexp.MustCompile(`^mcp__([^_][^/]*?)__([^/]+)$`)

type hookFlags struct {
	envelope string
	onHold   string
	holdWait time.Duration
	stateDir string
}

func hookCommand(g *globalFlags) *cobra.Command {
	hook := &cobra.Command{Use: "hook", Short: "Hooks of coding agents that put their tool calls through the kernel"}
	var f hookFlags
	cc := &cobra.Command{
		Use:   "claude-code [--envelope ID] [--on-hold wait|deny] [--hold-wait D] [--state-dir DIR]",
		Short: "Claude Code's PreToolUse and PostToolUse hook: each tool call an execute intent before it runs, its result after",
		Long: `annal hook claude-code reads a Claude Code hook input (JSON) on stdin. For PreToolUse it decides
the tool call as an execute intent on claude-code/<Tool> (an MCP tool mcp__S__T on mcp/S/T, as
annal mcp-gate names it; a read-only tool is an observe): denied, the call is blocked with the
kernel's reason; held, the hook waits for a human's answer (--on-hold wait, up to --hold-wait:
give the hook a timeout in settings.json above it) or blocks at once (--on-hold deny). For
PostToolUse it records what the tool gave back as the intent's result. The agent's credential
comes from the usual flags or environment (ANNAL_CREDENTIAL_FILE).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.onHold != "wait" && f.onHold != "deny" {
				return fmt.Errorf("--on-hold %q: wait or deny", f.onHold)
			}
			return runClaudeCodeHook(cmd, g, f)
		},
	}
	cc.Flags().StringVar(&f.envelope, "envelope", "", "the envelope the calls run under (default: the kernel picks)")
	cc.Flags().StringVar(&f.onHold, "on-hold", "wait", "a held call: wait for a human's answer in annal, or deny it at once")
	cc.Flags().DurationVar(&f.holdWait, "hold-wait", 50*time.Second, "with --on-hold wait: how long to wait for the answer")
	cc.Flags().StringVar(&f.stateDir, "state-dir", "", "where an intent waits for its result (default: the user's state folder, annal/claude-code)")
	hook.AddCommand(cc)
	return hook
}

// runClaudeCodeHook answers one hook input.
func runClaudeCodeHook(cmd *cobra.Command, g *globalFlags, f hookFlags) error {
	in, err := readHookInput(cmd.InOrStdin())
	if err != nil {
		return &exitError{code: 2, msg: "annal hook: " + err.Error()} // 2: Claude Code blocks the call
	}
	if in.Event != "PreToolUse" && in.Event != "PostToolUse" {
		return nil // another event: nothing to decide, no kernel to ask
	}
	if f.stateDir == "" {
		if f.stateDir, err = defaultHookStateDir(); err != nil {
			return &exitError{code: 2, msg: "annal hook: " + err.Error()}
		}
	}
	ctx, cancel := g.context(cmd)
	defer cancel()
	c, err := g.client(true)
	if err != nil {
		return &exitError{code: 2, msg: "annal hook: " + err.Error()}
	}
	if in.Event == "PreToolUse" {
		return preToolUse(ctx, cmd.OutOrStdout(), c, f, in)
	}
	return postToolUse(ctx, c, f, in)
}

func readHookInput(r io.Reader) (*hookInput, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxHookInput+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxHookInput {
		return nil, fmt.Errorf("the hook input is larger than %d bytes", maxHookInput)
	}
	var in hookInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("the hook input is not Claude Code's JSON: %v", err)
	}
	switch {
	case in.Event != "PreToolUse" && in.Event != "PostToolUse":
		return &in, nil
	case in.ToolName == "" || len(in.ToolName) > 256 || strings.ContainsAny(in.ToolName, "\x00\n"):
		return nil, fmt.Errorf("tool_name %q is not a tool's name", in.ToolName)
	case !toolUseID.MatchString(in.ToolUseID):
		return nil, fmt.Errorf("tool_use_id %q is not a tool call's id", in.ToolUseID)
	}
	return &in, nil
}

// toolTarget is the target a tool call acts on.
func toolTarget(tool string) string {
	if m := mcpTool.FindStringSubmatch(tool); m != nil {
		return "mcp/" + m[1] + "/" + m[2]
	}
	return "claude-code/" + tool
}

// contentID is the content id of a JSON value (RFC 8785 first, so the
// same input has one id however it was spelled).
func contentID(raw json.RawMessage) (string, int, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("null")
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", 0, err
	}
	return oid.Of(canon), len(canon), nil
}

// hookDecision is what a PreToolUse hook prints to block a call.
func hookDecision(w io.Writer, decision, reason string) error {
	return json.NewEncoder(w).Encode(map[string]any{"hookSpecificOutput": map[string]string{
		"hookEventName": "PreToolUse", "permissionDecision": decision, "permissionDecisionReason": reason}})
}

func preToolUse(ctx context.Context, out io.Writer, c *client.Client, f hookFlags, in *hookInput) error {
	target := toolTarget(in.ToolName)
	input, _, err := contentID(in.ToolInput)
	if err != nil {
		return hookDecision(out, "deny", "annal: the tool's input is not JSON: "+err.Error())
	}
	if readOnlyTools[in.ToolName] {
		if _, err := c.Submit(ctx, api.ActionRequest{Type: "observe", Target: target, Envelope: f.envelope}); err != nil {
			return hookDecision(out, "deny", "annal: "+err.Error())
		}
		return nil
	}
	about := map[string]any{"tool": in.ToolName, "tool_use_id": in.ToolUseID, "by": "claude-code"}
	if in.ToolName == "Bash" { // what policies' patterns judge: the command itself
		var bash struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(in.ToolInput, &bash) == nil && bash.Command != "" {
			about["command"] = bash.Command
		}
	}
	// A held call waits for its answer up to --hold-wait, or (deny) not at
	// all: the wait ends when the hold is known.
	decideCtx, cancel := context.WithTimeout(ctx, f.holdWait)
	defer cancel()
	var heldID string
	intent, err := c.DecideIntent(decideCtx, target, f.envelope, "", input, about, func(id string) {
		heldID = id
		if f.onHold == "deny" {
			cancel()
		}
	}, 500*time.Millisecond)
	switch {
	case heldID != "" && decideCtx.Err() != nil:
		return hookDecision(out, "deny", fmt.Sprintf("annal holds this call (hold %s) until a human approves it: annal holds approve %s, then try again", heldID, heldID))
	case err != nil:
		return hookDecision(out, "deny", "annal: "+err.Error())
	}
	return saveIntent(f.stateDir, in.ToolUseID, intent)
}

func postToolUse(ctx context.Context, c *client.Client, f hookFlags, in *hookInput) error {
	if readOnlyTools[in.ToolName] {
		return nil
	}
	intent, err := loadIntent(f.stateDir, in.ToolUseID)
	if errors.Is(err, os.ErrNotExist) {
		return nil // not a call this hook decided (or its result was recorded)
	} else if err != nil {
		return &exitError{code: 1, msg: "annal hook: " + err.Error()}
	}
	output, size, err := contentID(in.ToolResponse)
	if err != nil {
		return &exitError{code: 1, msg: "annal hook: the tool's response is not JSON: " + err.Error()}
	}
	r := execute.Result{OutputOID: output, ArtifactHash: output, OutputBytes: uint64(size), ExitCode: toolExitCode(in.ToolResponse)}
	if _, err := c.RecordResult(ctx, intent, r); err != nil {
		return &exitError{code: 1, msg: "annal hook: the result of " + in.ToolName + " could not be recorded (its intent stays open): " + err.Error()}
	}
	return os.Remove(intentFile(f.stateDir, in.ToolUseID))
}

// toolExitCode is 1 for a response that says the tool failed, else 0.
func toolExitCode(resp json.RawMessage) int32 {
	var r struct {
		IsError     bool   `json:"is_error"`
		Error       string `json:"error"`
		Interrupted bool   `json:"interrupted"`
	}
	if json.Unmarshal(resp, &r) == nil && (r.IsError || r.Error != "" || r.Interrupted) {
		return 1
	}
	return 0
}

func defaultHookStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "annal", "claude-code"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state folder: give --state-dir (%v)", err)
	}
	return filepath.Join(home, ".local", "state", "annal", "claude-code"), nil
}

func intentFile(dir, toolUseID string) string { return filepath.Join(dir, toolUseID+".json") }

// saveIntent keeps a decided intent until PostToolUse records its result.
func saveIntent(dir, toolUseID string, in *client.Intent) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	tmp := intentFile(dir, toolUseID) + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, intentFile(dir, toolUseID))
}

func loadIntent(dir, toolUseID string) (*client.Intent, error) {
	raw, err := os.ReadFile(intentFile(dir, toolUseID))
	if err != nil {
		return nil, err
	}
	var in client.Intent
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("state of tool call %s: %v", toolUseID, err)
	}
	return &in, nil
}
