package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/execute"
)

// annal hook claude-code | codex | cursor: the hooks of coding agents put
// every tool call through the kernel, as annal exec does a command:
//
//   - Before a call runs it is decided: an execute intent on the call's
//     target (<agent>/<Tool>; an MCP tool mcp__S__T on mcp/S/T, as annal
//     mcp-gate names it), its input the content id of the tool's input; a
//     read-only tool is an observe. Denied, the tool is blocked and the
//     model is told the kernel's reason; held, the hook waits for a human's
//     answer in annal (--on-hold wait) or blocks at once (--on-hold deny).
//   - After it ran, what the tool gave back is recorded as the intent's
//     result.
//
// A held call is never answered "ask": that lets the tool run on the local
// user's yes, which the kernel never sees, so the log would show a held
// intent and a tool that ran anyway. The human answers the hold in annal
// (console, annal holds approve, the Matrix room), where the log records
// who did.
//
// A kernel that cannot be reached, or a hook input that cannot be read,
// blocks the call (fail closed).

// maxHookInput bounds what a hook reads from stdin (a Write's content is
// in it).
const maxHookInput = 8 << 20

// toolUseID is the form of a tool call's id, which names the hook's state
// file between the call and its result.
var toolUseID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// mcpTool is Claude Code's and Codex's name of an MCP tool: mcp__<server>__<tool>.
var mcpTool = regexp.MustCompile(`^mcp__([^_][^/]*?)__([^/]+)$`)

type hookFlags struct {
	envelope string
	onHold   string
	holdWait time.Duration
	stateDir string
}

func hookCommand(g *globalFlags) *cobra.Command {
	hook := &cobra.Command{Use: "hook", Short: "Hooks of coding agents (Claude Code, Codex, Cursor) that put their tool calls through the kernel"}
	hook.AddCommand(claudeStyleCommand(g, claudeCode), claudeStyleCommand(g, codex), cursorCommand(g))
	return hook
}

// register adds the flags every agent's hook has; agent names its state
// folder.
func (f *hookFlags) register(cmd *cobra.Command, agent string) {
	cmd.Flags().StringVar(&f.envelope, "envelope", "", "the envelope the calls run under (default: the kernel picks)")
	cmd.Flags().StringVar(&f.onHold, "on-hold", "wait", "a held call: wait for a human's answer in annal, or deny it at once")
	cmd.Flags().DurationVar(&f.holdWait, "hold-wait", 50*time.Second, "with --on-hold wait: how long to wait for the answer")
	cmd.Flags().StringVar(&f.stateDir, "state-dir", "", "where an intent waits for its result (default: the user's state folder, annal/"+agent+")")
}

// ready checks the flags and fills in the state folder.
func (f *hookFlags) ready(agent string) error {
	if f.onHold != "wait" && f.onHold != "deny" {
		return fmt.Errorf("--on-hold %q: wait or deny (a held call is never answered \"ask\": the human answers it in annal)", f.onHold)
	}
	if f.stateDir != "" {
		return nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		f.stateDir = filepath.Join(d, "annal", agent)
		return nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("no state folder: give --state-dir (%v)", err)
	}
	f.stateDir = filepath.Join(home, ".local", "state", "annal", agent)
	return nil
}

// toolCall is one call of a coding agent's tool, as its hook decides it.
type toolCall struct {
	key      string          // names the call's state from before it runs to after: a file name
	target   string          // what the call acts on
	readOnly bool            // an observe, with no result to record
	input    json.RawMessage // the tool's input: its content id is the intent's input
	about    map[string]any  // what the log says of the call
}

// decideCall decides a call before it runs: "" when it may run, else why
// not (what the agent and its model are told).
func decideCall(ctx context.Context, c *client.Client, f hookFlags, call toolCall) string {
	input, _, err := contentID(call.input)
	if err != nil {
		return "annal: the tool's input is not JSON: " + err.Error()
	}
	if call.readOnly {
		if _, err := c.Submit(ctx, api.ActionRequest{Type: "observe", Target: call.target, Envelope: f.envelope}); err != nil {
			return "annal: " + err.Error()
		}
		return ""
	}
	// A held call waits for its answer up to --hold-wait, or (deny) not at
	// all: the wait ends when the hold is known.
	decideCtx, cancel := context.WithTimeout(ctx, f.holdWait)
	defer cancel()
	var heldID string
	intent, err := c.DecideIntent(decideCtx, call.target, f.envelope, "", input, call.about, func(id string) {
		heldID = id
		if f.onHold == "deny" {
			cancel()
		}
	}, 500*time.Millisecond)
	switch {
	case heldID != "" && decideCtx.Err() != nil:
		return fmt.Sprintf("annal holds this call (hold %s) until a human approves it: annal holds approve %s, then try again", heldID, heldID)
	case err != nil:
		return "annal: " + err.Error()
	}
	// Without its state the result could not be recorded: the call does not
	// run, and the log shows an intent that never had one.
	if err := saveIntent(f.stateDir, call.key, intent); err != nil {
		return "annal: the call was allowed, but its intent could not be kept for its result: " + err.Error()
	}
	return ""
}

// recordCall records what a call the hook decided gave back as its
// intent's result; failed says the tool reported a failure. A call the hook
// did not decide (a read-only one, one decided by another hook, or one
// whose result is recorded) has nothing to record.
func recordCall(ctx context.Context, c *client.Client, f hookFlags, key string, response json.RawMessage, failed bool) error {
	intent, err := loadIntent(f.stateDir, key)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	output, size, err := contentID(response)
	if err != nil {
		return fmt.Errorf("the tool's response is not JSON: %v", err)
	}
	r := execute.Result{OutputOID: output, ArtifactHash: output, OutputBytes: uint64(size)}
	if failed {
		r.ExitCode = 1
	}
	if _, err := c.RecordResult(ctx, intent, r); err != nil {
		return fmt.Errorf("the result of %s could not be recorded (its intent stays open): %v", intent.Target, err)
	}
	return os.Remove(intentFile(f.stateDir, key))
}

// readHookJSON reads an agent's hook input from stdin into v, up to
// maxHookInput bytes.
func readHookJSON(r io.Reader, agent string, v any) error {
	raw, err := io.ReadAll(io.LimitReader(r, maxHookInput+1))
	if err != nil {
		return err
	}
	if len(raw) > maxHookInput {
		return fmt.Errorf("the hook input is larger than %d bytes", maxHookInput)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("the hook input is not %s's JSON: %v", agent, err)
	}
	return nil
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

// pairKey names a call that has no id of its own by what it is: the same
// fields before it runs and after.
func pairKey(kind string, fields ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(fields, "\x00")))
	return kind + "-" + hex.EncodeToString(sum[:16])
}

// validToolName is a tool's name fit to be a target's segment.
func validToolName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 256 || !utf8.ValidString(name) {
		return false
	}
	return !strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '/' || r == '\\' })
}

func intentFile(dir, key string) string { return filepath.Join(dir, key+".json") }

// saveIntent keeps a decided intent until its result is recorded.
func saveIntent(dir, key string, in *client.Intent) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	tmp := intentFile(dir, key) + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, intentFile(dir, key))
}

func loadIntent(dir, key string) (*client.Intent, error) {
	raw, err := os.ReadFile(intentFile(dir, key))
	if err != nil {
		return nil, err
	}
	var in client.Intent
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("state of tool call %s: %v", key, err)
	}
	return &in, nil
}

// failedResponse says whether a tool's response reports a failure: an
// error, an interruption, or a non-zero exit code.
func failedResponse(resp json.RawMessage) bool {
	var r struct {
		IsError     bool   `json:"is_error"`
		Error       string `json:"error"`
		Interrupted bool   `json:"interrupted"`
		ExitCode    int    `json:"exit_code"`
	}
	return json.Unmarshal(resp, &r) == nil && (r.IsError || r.Error != "" || r.Interrupted || r.ExitCode != 0)
}
