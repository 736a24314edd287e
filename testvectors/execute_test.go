package testvectors

import (
	"encoding/json"
	"testing"

	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/execute"
)

const executeFile = "execute.json"

// executeVectors are the content ids and payloads of an execute decided
// before it runs (FORMATS.md, "Event entries"): inputs given, everything
// else computed.
type executeVectors struct {
	Description string          `json:"description"`
	Commands    []commandVector `json:"commands"`
	ToolCalls   []toolVector    `json:"tool_calls"`
	ToolResults []resultVector  `json:"tool_results"`
	Intents     []intentVector  `json:"intents"`
	Results     []payloadVector `json:"results"`
}

type commandVector struct {
	Name      string   `json:"name"`
	Argv      []string `json:"argv"`
	Stdin     string   `json:"stdin"`
	StdinOID  string   `json:"stdin_oid"`
	Canonical string   `json:"canonical"`
	InputOID  string   `json:"input_oid"`
}

type toolVector struct {
	Name      string          `json:"name"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Canonical string          `json:"canonical"`
	InputOID  string          `json:"input_oid"`
}

type resultVector struct {
	Name      string          `json:"name"`
	Result    json.RawMessage `json:"result"`
	Canonical string          `json:"canonical"`
	OutputOID string          `json:"output_oid"`
}

type intentVector struct {
	Name     string         `json:"name"`
	InputOID string         `json:"input_oid"`
	About    map[string]any `json:"about"`
	Payload  string         `json:"payload"`
}

type payloadVector struct {
	Name         string         `json:"name"`
	Intent       uint64         `json:"intent"`
	InputOID     string         `json:"input_oid"`
	OutputOID    string         `json:"output_oid"`
	ArtifactHash string         `json:"artifact_hash"`
	ExitCode     int32          `json:"exit_code"`
	OutputBytes  uint64         `json:"output_bytes"`
	About        map[string]any `json:"about"`
	Payload      string         `json:"payload"`
}

func TestExecuteVectors(t *testing.T) {
	var f executeVectors
	load(t, executeFile, &f)
	if len(f.Commands) == 0 || len(f.ToolCalls) == 0 || len(f.ToolResults) == 0 || len(f.Intents) == 0 || len(f.Results) == 0 {
		t.Fatal("a section of execute.json is empty")
	}
	for i := range f.Commands {
		v := &f.Commands[i]
		expect(t, executeFile, v.Name, "stdin_oid", &v.StdinOID, oid.Of([]byte(v.Stdin)))
		c, err := execute.CanonicalCommand(v.Argv, v.StdinOID)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, executeFile, v.Name, "canonical", &v.Canonical, string(c))
		expect(t, executeFile, v.Name, "input_oid", &v.InputOID, oid.Of(c))
	}
	for i := range f.ToolCalls {
		v := &f.ToolCalls[i]
		c, err := execute.CanonicalToolCall(v.Server, v.Tool, v.Arguments)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, executeFile, v.Name, "canonical", &v.Canonical, string(c))
		expect(t, executeFile, v.Name, "input_oid", &v.InputOID, oid.Of(c))
	}
	for i := range f.ToolResults {
		v := &f.ToolResults[i]
		c, err := execute.CanonicalToolResult(v.Result)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, executeFile, v.Name, "canonical", &v.Canonical, string(c))
		expect(t, executeFile, v.Name, "output_oid", &v.OutputOID, oid.Of(c))
	}
	for i := range f.Intents {
		v := &f.Intents[i]
		p, err := execute.Intent(v.InputOID, v.About)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, executeFile, v.Name, "payload", &v.Payload, string(p))
	}
	for i := range f.Results {
		v := &f.Results[i]
		p, err := execute.Result{Intent: v.Intent, InputOID: v.InputOID, OutputOID: v.OutputOID, ArtifactHash: v.ArtifactHash,
			ExitCode: v.ExitCode, OutputBytes: v.OutputBytes, About: v.About}.Payload()
		if err != nil {
			t.Fatal(err)
		}
		expect(t, executeFile, v.Name, "payload", &v.Payload, string(p))
	}
	// Reserved members cannot be smuggled in as a description.
	if _, err := execute.Intent(f.Intents[0].InputOID, map[string]any{"exit_code": 0}); err == nil {
		t.Error("an intent described with exit_code was built")
	}
	save(t, executeFile, &f)
}
