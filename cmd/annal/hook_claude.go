package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/client"
)

// claudeStyle is a coding agent whose hooks speak Claude Code's JSON:
// PreToolUse and PostToolUse on stdin with tool_name, tool_input,
// tool_use_id and tool_response; a block as hookSpecificOutput's
// permissionDecision "deny" with its reason, or exit 2 with the reason on
// stderr. Codex's hooks take the same input and output (its PreToolUse
// accepts only "deny"; this hook prints nothing to allow).
type claudeStyle struct {
	name     string          // the command's name, and its tools' targets' first segment
	title    string          // the agent's name in prose
	readOnly map[string]bool // tools that change nothing: an observe
	shell    string          // the tool whose input's command policies judge
}

var claudeCode = claudeStyle{name: "claude-code", title: "Claude Code", shell: "Bash",
	readOnly: map[string]bool{"Read": true, "Grep": true, "Glob": true, "LS": true, "NotebookRead": true,
		"WebSearch": true, "WebFetch": true, "TodoRead": true}}

// codex: Codex sends Bash (a shell command, tool_input.command),
// apply_patch (a file edit, the patch in tool_input.command) and MCP tools.
var codex = claudeStyle{name: "codex", title: "Codex", shell: "Bash", readOnly: map[string]bool{}}

// hookInput is what a Claude-style agent sends a tool hook on stdin.
type hookInput struct {
	SessionID    string          `json:"session_id"`
	Event        string          `json:"hook_event_name"`
	ToolName     string          `json:"tool_name"`
	ToolInput    json.RawMessage `json:"tool_input"`
	ToolUseID    string          `json:"tool_use_id"`
	ToolResponse json.RawMessage `json:"tool_response"`
}

func claudeStyleCommand(g *globalFlags, a claudeStyle) *cobra.Command {
	var f hookFlags
	cmd := &cobra.Command{
		Use:   a.name + " [--envelope ID] [--on-hold wait|deny] [--hold-wait D] [--state-dir DIR]",
		Short: a.title + "'s PreToolUse and PostToolUse hook: each tool call an execute intent before it runs, its result after",
		Long: fmt.Sprintf(`annal hook %[1]s reads a %[2]s hook input (JSON) on stdin. For PreToolUse it decides
the tool call as an execute intent on %[1]s/<Tool> (an MCP tool mcp__S__T on mcp/S/T, as
annal mcp-gate names it; a read-only tool is an observe): denied, the call is blocked with the
kernel's reason; held, the hook waits for a human's answer (--on-hold wait, up to --hold-wait:
give the hook a timeout above it) or blocks at once (--on-hold deny). Allowed, it prints
nothing, so %[2]s's own permission rules still apply. For PostToolUse it records what the tool
gave back as the intent's result. The agent's credential comes from the usual flags or
environment (ANNAL_CREDENTIAL_FILE).`, a.name, a.title),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.ready(a.name); err != nil {
				return err
			}
			return a.run(cmd, g, f)
		},
	}
	f.register(cmd, a.name)
	return cmd
}

// run answers one hook input. Exit 2 with a reason on stderr blocks the
// call in both Claude Code and Codex.
func (a claudeStyle) run(cmd *cobra.Command, g *globalFlags, f hookFlags) error {
	in, err := readHookInput(cmd.InOrStdin(), a.title)
	if err != nil {
		return &exitError{code: 2, msg: "annal hook: " + err.Error()}
	}
	if in.Event != "PreToolUse" && in.Event != "PostToolUse" {
		return nil // another event: nothing to decide, no kernel to ask
	}
	ctx, cancel := g.context(cmd)
	defer cancel()
	c, err := g.client(true)
	if err != nil {
		return &exitError{code: 2, msg: "annal hook: " + err.Error()}
	}
	if in.Event == "PreToolUse" {
		return a.preToolUse(ctx, cmd.OutOrStdout(), c, f, in)
	}
	if err := recordCall(ctx, c, f, in.ToolUseID, in.ToolResponse, failedResponse(in.ToolResponse)); err != nil {
		return &exitError{code: 1, msg: "annal hook: " + err.Error()}
	}
	return nil
}

func readHookInput(r io.Reader, agent string) (*hookInput, error) {
	var in hookInput
	if err := readHookJSON(r, agent, &in); err != nil {
		return nil, err
	}
	switch {
	case in.Event != "PreToolUse" && in.Event != "PostToolUse":
		return &in, nil
	case !validToolName(in.ToolName):
		return nil, fmt.Errorf("tool_name %q is not a tool's name", in.ToolName)
	case !toolUseID.MatchString(in.ToolUseID):
		return nil, fmt.Errorf("tool_use_id %q is not a tool call's id", in.ToolUseID)
	}
	return &in, nil
}

// target is what a tool call acts on.
func (a claudeStyle) target(tool string) string {
	if m := mcpTool.FindStringSubmatch(tool); m != nil {
		return "mcp/" + m[1] + "/" + m[2]
	}
	return a.name + "/" + tool
}

// hookDecision is what a PreToolUse hook prints to block a call.
func hookDecision(w io.Writer, decision, reason string) error {
	return json.NewEncoder(w).Encode(map[string]any{"hookSpecificOutput": map[string]string{
		"hookEventName": "PreToolUse", "permissionDecision": decision, "permissionDecisionReason": reason}})
}

func (a claudeStyle) preToolUse(ctx context.Context, out io.Writer, c *client.Client, f hookFlags, in *hookInput) error {
	call := toolCall{key: in.ToolUseID, target: a.target(in.ToolName), readOnly: a.readOnly[in.ToolName], input: in.ToolInput,
		about: map[string]any{"tool": in.ToolName, "tool_use_id": in.ToolUseID, "by": a.name}}
	if in.ToolName == a.shell { // what policies' patterns judge: the command itself
		var shell struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(in.ToolInput, &shell) == nil && strings.TrimSpace(shell.Command) != "" {
			call.about["command"] = shell.Command
		}
	}
	if reason := decideCall(ctx, c, f, call); reason != "" {
		return hookDecision(out, "deny", reason)
	}
	return nil
}
