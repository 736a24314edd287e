// Package execute builds the payloads of an execute decided before it runs
// (rules version 3): the intent, logged and decided first, and the result
// that completes it once the command or tool call ran. It also fixes how the
// content ids of what ran are computed, so that anyone holding the bytes can
// recompute them: an `annal exec` command line and its stdin, an MCP tool
// call and its result. testvectors/FORMATS.md ("Event entries") states the
// forms; execute.json beside it holds the known answers.
//
// Its contract:
//
//   - Every OID is blobstore.OID, "sha256:" and the lower-case hex SHA-256,
//     of the bytes that Canonical… returns; those bytes are RFC 8785 JSON, so the same
//     call gives the same OID in any language.
//   - Payloads are built here and checked by the kernel: nothing here
//     decides whether an intent or a result is allowed.
package execute

import (
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// canonical encodes v as RFC 8785 JSON.
func canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// CanonicalCommand is the input of a command run by `annal exec`:
// {"argv": [...], "stdin": OID of its stdin}.
func CanonicalCommand(argv []string, stdinOID string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command")
	}
	return canonical(struct {
		Argv  []string `json:"argv"`
		Stdin string   `json:"stdin"`
	}{argv, stdinOID})
}

// CanonicalToolCall is the input of an MCP tool call made through the gate:
// {"arguments": {...}, "server": name, "tool": name}. Arguments that are
// absent count as {}.
func CanonicalToolCall(server, tool string, arguments json.RawMessage) ([]byte, error) {
	if len(arguments) == 0 || string(arguments) == "null" {
		arguments = json.RawMessage(`{}`)
	}
	return canonical(struct {
		Arguments json.RawMessage `json:"arguments"`
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
	}{arguments, server, tool})
}

// CanonicalToolResult is the output of an MCP tool call: the members of
// the result the MCP schema defines for it — "content" (absent: []),
// "structuredContent" (if present and not null) and "isError" (only when
// true) — so that transport details ("_meta", where the gate puts the
// receipt, or a protocol's "resultType") never change it, and the agent can
// recompute it from the result it received.
func CanonicalToolResult(result json.RawMessage) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(result, &members); err != nil || members == nil {
		return nil, fmt.Errorf("a tool result is a JSON object")
	}
	out := map[string]json.RawMessage{"content": json.RawMessage(`[]`)}
	if c, ok := members["content"]; ok && string(c) != "null" {
		out["content"] = c
	}
	if sc, ok := members["structuredContent"]; ok && string(sc) != "null" {
		out["structuredContent"] = sc
	}
	if e, ok := members["isError"]; ok {
		var isError bool
		if err := json.Unmarshal(e, &isError); err != nil {
			return nil, fmt.Errorf("isError is not a boolean")
		}
		if isError {
			out["isError"] = json.RawMessage(`true`)
		}
	}
	return canonical(out)
}

// Intent is the payload of an intent: input names what will run; about
// describes it in the log (members the kernel's policies can match, such as
// the argv or the tool's arguments), and may be nil.
func Intent(input string, about map[string]any) (json.RawMessage, error) {
	p := map[string]any{}
	for k, v := range about {
		p[k] = v
	}
	for _, reserved := range []string{"phase", "input_oid", "intent", "output_oid", "artifact_hash", "exit_code", "output_bytes"} {
		if _, ok := p[reserved]; ok {
			return nil, fmt.Errorf("intent: %q is not a description member", reserved)
		}
	}
	p["phase"], p["input_oid"] = "intent", input
	return canonical(p)
}

// Result is what ran, completing an intent.
type Result struct {
	// Intent is the log index of the intent's action (of the approval, when
	// the intent was held).
	Intent       uint64
	InputOID     string
	OutputOID    string
	ArtifactHash string
	ExitCode     int32
	OutputBytes  uint64
	// About describes the outcome further (e.g. "stderr_oid"), or nil.
	About map[string]any
}

// Payload is the result's payload (§5.6 with "intent").
func (r Result) Payload() (json.RawMessage, error) {
	p := map[string]any{}
	for k, v := range r.About {
		p[k] = v
	}
	p["intent"], p["input_oid"], p["output_oid"], p["artifact_hash"] = r.Intent, r.InputOID, r.OutputOID, r.ArtifactHash
	p["exit_code"], p["output_bytes"] = r.ExitCode, r.OutputBytes
	return canonical(p)
}
