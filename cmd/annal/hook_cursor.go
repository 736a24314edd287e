package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// Cursor's hooks (.cursor/hooks.json, version 1) send one JSON object on
// stdin per event, with hook_event_name, conversation_id and
// generation_id, and read a permission from stdout on the events before
// an action: {"permission": "allow"|"deny", "user_message", "agent_message"}.
// annal hook cursor answers:
//
//   - beforeShellExecution / afterShellExecution: the command, an intent on
//     cursor/Shell before, its output the result after;
//   - beforeMCPExecution / afterMCPExecution: an MCP tool, an intent on
//     cursor/mcp/<tool> before, result_json the result after;
//   - beforeReadFile: an observe of cursor/Read;
//   - preToolUse / postToolUse (Cursor's generic tool hooks): an intent on
//     cursor/<tool> (MCP:<tool> on cursor/mcp/<tool>; Read, Grep, Glob and
//     LS are observes), its tool_output the result;
//   - afterFileEdit: Cursor has no hook before an edit, so an edit is
//     recorded after it was made, as a mutate of cursor/Edit, and cannot
//     be blocked; use preToolUse to decide edits before they happen.
//
// The shell and MCP events carry no call id: a call's intent waits for its
// result under a name made of the conversation, the generation and the
// call itself, the same before and after.

// cursorInput is what Cursor sends its hooks on stdin.
type cursorInput struct {
	Event          string          `json:"hook_event_name"`
	ConversationID string          `json:"conversation_id"`
	GenerationID   string          `json:"generation_id"`
	Command        string          `json:"command"`
	Cwd            string          `json:"cwd"`
	Output         string          `json:"output"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"` // an object, or a string holding one
	ResultJSON     json.RawMessage `json:"result_json"`
	ToolUseID      string          `json:"tool_use_id"`
	ToolOutput     json.RawMessage `json:"tool_output"`
	FilePath       string          `json:"file_path"`
	Edits          json.RawMessage `json:"edits"`
}

// cursorReadOnly are Cursor's tools that change nothing: an observe.
var cursorReadOnly = map[string]bool{"Read": true, "Grep": true, "Glob": true, "LS": true}

func cursorCommand(g *globalFlags) *cobra.Command {
	var f hookFlags
	cmd := &cobra.Command{
		Use:   "cursor [--envelope ID] [--on-hold wait|deny] [--hold-wait D] [--state-dir DIR]",
		Short: "Cursor's hooks: each shell command, MCP call and tool call an execute intent before it runs, its result after",
		Long: `annal hook cursor reads a Cursor hook input (JSON) on stdin. Before a shell command, an MCP
call or a tool call (beforeShellExecution, beforeMCPExecution, preToolUse) it decides the call as
an execute intent on cursor/Shell, cursor/mcp/<tool> or cursor/<tool> and prints Cursor's
permission: allow, or deny with the kernel's reason; held, it waits for a human's answer in annal
(--on-hold wait, up to --hold-wait) or denies at once (--on-hold deny). beforeReadFile is an
observe of cursor/Read. After the call (afterShellExecution, afterMCPExecution, postToolUse) it
records what the call gave back as the intent's result. afterFileEdit records an edit Cursor
already made, as a mutate of cursor/Edit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.ready("cursor"); err != nil {
				return err
			}
			return runCursorHook(cmd, g, f)
		},
	}
	f.register(cmd, "cursor")
	return cmd
}

// cursorPermission is what Cursor reads before an action.
type cursorPermission struct {
	Permission   string `json:"permission"`
	UserMessage  string `json:"user_message,omitempty"`
	AgentMessage string `json:"agent_message,omitempty"`
}

// answer prints the permission for a call: allowed when reason is "".
func answer(w io.Writer, reason string) error {
	p := cursorPermission{Permission: "allow"}
	if reason != "" {
		p = cursorPermission{Permission: "deny", UserMessage: reason, AgentMessage: reason}
	}
	return json.NewEncoder(w).Encode(p)
}

func runCursorHook(cmd *cobra.Command, g *globalFlags, f hookFlags) error {
	out := cmd.OutOrStdout()
	in, err := readCursorInput(cmd.InOrStdin())
	if err != nil { // blocked both ways: a denial Cursor reads, and exit 2
		answer(out, "annal hook: "+err.Error())
		return &exitError{code: 2, msg: "annal hook: " + err.Error()}
	}
	call, before, ok := in.call()
	if !ok {
		return nil // an event this hook does not answer
	}
	ctx, cancel := g.context(cmd)
	defer cancel()
	c, err := g.client(true)
	if err != nil {
		if before {
			answer(out, "annal hook: "+err.Error())
		}
		return &exitError{code: 2, msg: "annal hook: " + err.Error()}
	}
	switch {
	case in.Event == "afterFileEdit":
		return recordEdit(ctx, c, f, call)
	case before:
		return answer(out, decideCall(ctx, c, f, call))
	}
	response := in.response()
	if err := recordCall(ctx, c, f, call.key, response, failedResponse(response)); err != nil {
		return &exitError{code: 1, msg: "annal hook: " + err.Error()}
	}
	return nil
}

func readCursorInput(r io.Reader) (*cursorInput, error) {
	var in cursorInput
	if err := readHookJSON(r, "Cursor", &in); err != nil {
		return nil, err
	}
	in.ToolInput = unquoteJSON(in.ToolInput)
	in.ResultJSON = unquoteJSON(in.ResultJSON)
	in.ToolOutput = unquoteJSON(in.ToolOutput)
	switch in.Event {
	case "beforeMCPExecution", "afterMCPExecution":
		if !validToolName(in.ToolName) {
			return nil, fmt.Errorf("tool_name %q is not a tool's name", in.ToolName)
		}
	case "preToolUse", "postToolUse":
		name := strings.TrimPrefix(in.ToolName, "MCP:")
		if !validToolName(name) {
			return nil, fmt.Errorf("tool_name %q is not a tool's name", in.ToolName)
		}
		if in.ToolUseID != "" && !toolUseID.MatchString(in.ToolUseID) {
			return nil, fmt.Errorf("tool_use_id %q is not a tool call's id", in.ToolUseID)
		}
	}
	return &in, nil
}

// unquoteJSON is the JSON a string holds, for fields Cursor sends as a
// string of JSON (tool_input, result_json); any other value as it is.
func unquoteJSON(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return raw
	}
	if inner := json.RawMessage(s); json.Valid(inner) {
		return inner
	}
	return raw
}

// call is the tool call an event is about, whether the event comes before
// it (a permission to print), and false for an event the hook does not
// answer.
func (in *cursorInput) call() (toolCall, bool, bool) {
	about := map[string]any{"by": "cursor"}
	switch in.Event {
	case "beforeShellExecution", "afterShellExecution":
		about["tool"], about["command"] = "Shell", in.Command
		input, _ := json.Marshal(map[string]string{"command": in.Command, "cwd": in.Cwd})
		key := pairKey("shell", in.ConversationID, in.GenerationID, in.Command, in.Cwd)
		return toolCall{key: key, target: "cursor/Shell", input: input, about: about}, in.Event == "beforeShellExecution", true
	case "beforeMCPExecution", "afterMCPExecution":
		about["tool"] = "MCP:" + in.ToolName
		key := pairKey("mcp", in.ConversationID, in.GenerationID, in.ToolName, canonicalOrRaw(in.ToolInput))
		return toolCall{key: key, target: "cursor/mcp/" + in.ToolName, input: in.ToolInput, about: about}, in.Event == "beforeMCPExecution", true
	case "beforeReadFile":
		return toolCall{target: "cursor/Read", readOnly: true}, true, true
	case "preToolUse", "postToolUse":
		tool, target := in.ToolName, "cursor/"+in.ToolName
		if name, ok := strings.CutPrefix(tool, "MCP:"); ok {
			target = "cursor/mcp/" + name
		}
		about["tool"] = tool
		key := in.ToolUseID
		if key == "" {
			key = pairKey("tool", in.ConversationID, in.GenerationID, tool, canonicalOrRaw(in.ToolInput))
		} else {
			about["tool_use_id"] = key
		}
		return toolCall{key: key, target: target, readOnly: cursorReadOnly[tool], input: in.ToolInput, about: about}, in.Event == "preToolUse", true
	case "afterFileEdit":
		input, _ := json.Marshal(map[string]any{"file_path": in.FilePath, "edits": in.Edits})
		return toolCall{target: "cursor/Edit", input: input, about: map[string]any{"by": "cursor", "tool": "Edit"}}, false, true
	}
	return toolCall{}, false, false
}

// response is what a call gave back, by the event's field for it.
func (in *cursorInput) response() json.RawMessage {
	switch in.Event {
	case "afterShellExecution":
		raw, _ := json.Marshal(map[string]string{"output": in.Output})
		return raw
	case "afterMCPExecution":
		return in.ResultJSON
	}
	return in.ToolOutput
}

// canonicalOrRaw is a JSON value in RFC 8785 form, or as sent when it is
// not JSON (the key it makes is then the same before and after all the
// same).
func canonicalOrRaw(raw json.RawMessage) string {
	if id, _, err := contentID(raw); err == nil {
		return id
	}
	return string(raw)
}

// recordEdit records an edit Cursor has already made: a mutate of
// cursor/Edit whose payload is the content id of the file's path and
// edits. A refusal is reported on stderr; the edit stays made.
func recordEdit(ctx context.Context, c *client.Client, f hookFlags, call toolCall) error {
	input, _, err := contentID(call.input)
	if err != nil {
		return &exitError{code: 1, msg: "annal hook: the edit is not JSON: " + err.Error()}
	}
	payload, _ := json.Marshal(map[string]any{"by": "cursor", "tool": "Edit", "input_oid": input})
	if _, err := c.Submit(ctx, api.ActionRequest{Type: "mutate", Target: call.target, Payload: payload, Envelope: f.envelope}); err != nil {
		return &exitError{code: 1, msg: "annal hook: an edit Cursor made was refused by the kernel (it cannot be undone from here): " + err.Error()}
	}
	return nil
}
