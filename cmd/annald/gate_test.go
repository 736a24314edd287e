package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/annal-dev/annal/agentmcp"
	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/execute"
	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel/event"
)

// gateAgent creates an agent whose grants and envelope allow targets,
// holding holdOn for a human, and returns it with its credential.
func gateAgent(t *testing.T, d *daemon, grants []api.Grant, holdOn []api.Grant) (string, string) {
	t.Helper()
	ctx := context.Background()
	root := d.client(t, d.rootCredential(t))
	trust := 0.8
	a, err := root.CreateAgent(ctx, api.AgentRequest{Name: "gated", Purpose: "MCP gate test", Energy: 100000, Trust: &trust, Grants: grants})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 50000, Grants: grants, HoldOn: holdOn}); err != nil {
		t.Fatal(err)
	}
	return a.ID, a.Credential
}

// gateSession starts `annal mcp-gate` over stdio in front of server (a
// command) and connects to it as the agent, with the Go SDK's client.
func gateSession(t *testing.T, d *daemon, cred string, gateArgs []string, server ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(annalBinary, append(append([]string{"mcp-gate"}, gateArgs...), append([]string{"--"}, server...)...)...)
	cmd.Env = append(os.Environ(), "ANNAL_SERVER="+d.url, "ANNAL_CREDENTIAL="+cred)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to the gate: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// receiptOf reads the gate's receipt from a tool result's _meta.
type gateReceipt struct {
	Intent  uint64       `json:"intent"`
	HoldID  string       `json:"hold_id"`
	Result  *api.Receipt `json:"result"`
	Observe *api.Receipt `json:"observe"`
}

func receiptOf(t *testing.T, res *mcp.CallToolResult) gateReceipt {
	t.Helper()
	raw, err := json.Marshal(res.Meta[agentmcp.MetaReceipt])
	var r gateReceipt
	if err == nil {
		err = json.Unmarshal(raw, &r)
	}
	if err != nil || (r.Result == nil && r.Observe == nil) {
		t.Fatalf("no receipt in the result's _meta: %s (%v)", raw, err)
	}
	return r
}

func eventAt(t *testing.T, c *client.Client, index uint64) *event.Event {
	t.Helper()
	entry, err := c.Event(context.Background(), index)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := event.Parse(entry)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// The reference filesystem server behind the gate: the agent sees only
// the tools its grants could allow; an allowed write runs and is recorded
// with its receipt in _meta; a write a policy denies never reaches the
// server (the file is not written); a held call runs once approved and never
// when rejected; a read-only tool is logged as an observe first.
func TestGate_FilesystemServer(t *testing.T) {
	fsServer := npmBin(t, "mcp-server-filesystem")
	d := startDaemon(t, t.TempDir())
	ctx := context.Background()
	grants := []api.Grant{{Pattern: "mcp/fs/write_file", Actions: []string{"execute"}}, {Pattern: "mcp/fs/create_directory", Actions: []string{"execute"}},
		{Pattern: "mcp/fs/read_text_file", Actions: []string{"observe"}}, {Pattern: "mcp/fs/list_directory", Actions: []string{"observe"}}}
	holdOn := []api.Grant{{Pattern: "mcp/fs/create_directory", Actions: []string{"execute"}}}
	agentID, cred := gateAgent(t, d, grants, holdOn)
	root := d.client(t, d.rootCredential(t))
	if _, err := root.SetPolicy(ctx, "no-passwords", json.RawMessage(`{"name":"no-passwords","blocked_actions":[],"blocked_patterns":["password"],"signal_on_violation":false}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := root.AttachPolicy(ctx, "no-passwords", api.AttachRequest{Agent: agentID}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cs := gateSession(t, d, cred, []string{"--name", "fs"}, fsServer, dir)

	names := toolNames(t, cs)
	for _, want := range []string{"write_file", "create_directory", "read_text_file", "list_directory"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	for _, hidden := range []string{"edit_file", "move_file", "read_media_file", "search_files"} {
		if slices.Contains(names, hidden) {
			t.Errorf("tools/list shows %s, which no grant of the agent allows: %v", hidden, names)
		}
	}

	// Allowed: written, recorded, the receipt in _meta.
	notes := filepath.Join(dir, "notes.md")
	args := map[string]any{"path": notes, "content": "hello\n"}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("write_file: %v %s", err, textOf(res))
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "hello\n" {
		t.Fatalf("the allowed write did not happen: %q %v", b, err)
	}
	r := receiptOf(t, res)
	intent, result := eventAt(t, root, r.Intent), eventAt(t, root, r.Result.Index)
	rawArgs, _ := json.Marshal(args)
	canonical, _ := execute.CanonicalToolCall("fs", "write_file", rawArgs)
	var ip, rp map[string]any
	json.Unmarshal(intent.Action.Payload, &ip)
	json.Unmarshal(result.Action.Payload, &rp)
	if intent.Actor != agentID || intent.Action.Target != "mcp/fs/write_file" || ip["phase"] != "intent" || ip["input_oid"] != oid(string(canonical)) {
		t.Errorf("intent %s by %s on %s", intent.Action.Payload, intent.Actor, intent.Action.Target)
	}
	out, _ := json.Marshal(res) // as the agent got it; the OID leaves out _meta, where the receipt is
	canonicalOut, _ := execute.CanonicalToolResult(out)
	if rp["intent"] != float64(r.Intent) || rp["exit_code"] != float64(0) || rp["output_oid"] != oid(string(canonicalOut)) {
		t.Errorf("result %s; the result %s hashes to %s", result.Action.Payload, canonicalOut, oid(string(canonicalOut)))
	}

	// A tool the agent cannot see is never called.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "move_file", Arguments: map[string]any{"source": notes, "destination": notes + ".moved"}}); err == nil && !res.IsError {
		t.Error("a hidden tool was called")
	}
	if _, err := os.Stat(notes); err != nil {
		t.Errorf("the hidden tool moved the file: %v", err)
	}

	// Denied by a policy: the server never sees the call.
	secret := filepath.Join(dir, "secret.txt")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": secret, "content": "password=hunter2"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "policy") || !strings.Contains(textOf(res), "not made") {
		t.Fatalf("a call the policy blocks: %v %s", err, textOf(res))
	}
	if _, err := os.Stat(secret); !os.IsNotExist(err) {
		t.Fatalf("the denied call reached the server: %v", err)
	}

	// Held: approved, the directory is made; rejected, it never is.
	for _, decision := range []string{"approve", "reject"} {
		target := filepath.Join(dir, "made-"+decision)
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_directory", Arguments: map[string]any{"path": target}})
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			done <- res
		}()
		hold := waitPendingHold(t, root)
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Fatalf("the held call ran before a human answered")
		}
		if _, err := root.AnswerHold(ctx, hold.ID, decision, "test"); err != nil {
			t.Fatal(err)
		}
		var res *mcp.CallToolResult
		select {
		case res = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the held call did not return after the answer")
		}
		_, statErr := os.Stat(target)
		if decision == "approve" {
			if res.IsError || statErr != nil || receiptOf(t, res).HoldID != hold.ID {
				t.Fatalf("approved: %s, directory %v", textOf(res), statErr)
			}
		} else if !res.IsError || !os.IsNotExist(statErr) || !strings.Contains(textOf(res), "not made") {
			t.Fatalf("rejected: %s, directory %v", textOf(res), statErr)
		}
	}

	// Read-only: an observe, logged before the read.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": notes}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "hello") {
		t.Fatalf("read_text_file: %v %s", err, textOf(res))
	}
	if obs := eventAt(t, root, receiptOf(t, res).Observe.Index); obs.Action.Type != event.Observe || obs.Action.Target != "mcp/fs/read_text_file" {
		t.Errorf("the read was logged as %s on %s", obs.Action.Type, obs.Action.Target)
	}
}

func waitPendingHold(t *testing.T, root *client.Client) api.Hold {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		hs, err := root.Holds(context.Background(), "pending")
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) == 1 {
			return hs[0]
		}
	}
	t.Fatal("no hold appeared")
	return api.Hold{}
}

// A gate whose kernel is gone lets nothing through: the call fails and the
// server never sees it.
func TestGate_FailsClosedWithoutTheKernel(t *testing.T) {
	fsServer := npmBin(t, "mcp-server-filesystem")
	d := startDaemon(t, t.TempDir())
	_, cred := gateAgent(t, d, []api.Grant{{Pattern: "mcp/fs/**", Actions: []string{"execute"}}}, nil)
	dir := t.TempDir()
	cs := gateSession(t, d, cred, []string{"--name", "fs"}, fsServer, dir)
	d.kill(t)
	file := filepath.Join(dir, "after-kill.txt")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": file, "content": "x"}})
	if err == nil && !res.IsError {
		t.Fatal("a call went through with the kernel down")
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the server saw a call the kernel never decided: %v", err)
	}
}

// The HTTP form: the reference "everything" server over streamable HTTP,
// behind `annal mcp-gate --listen`, driven by the official inspector's
// CLI with the agent's bearer credential.
func TestGate_HTTPWithEverythingServerAndInspector(t *testing.T) {
	everything, inspectorCLI := npmBin(t, "mcp-server-everything"), npmBin(t, "mcp-inspector-cli")
	d := startDaemon(t, t.TempDir())
	agentID, cred := gateAgent(t, d, []api.Grant{{Pattern: "mcp/everything/echo", Actions: []string{"execute"}}, {Pattern: "mcp/everything/get-sum", Actions: []string{"observe"}}}, nil)

	port := servicestest.FreePort(t)
	preload := filepath.Join(t.TempDir(), "localhost-only.cjs")
	// The server listens on every interface; tests bind servers to 127.0.0.1 only.
	os.WriteFile(preload, []byte(`const net = require("net"); const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) { if (typeof args[0] === "number" || typeof args[0] === "string") { args.splice(1, 0, "127.0.0.1"); } return listen.apply(this, args); };
`), 0o644)
	upstream := exec.Command(everything, "streamableHttp")
	upstream.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "NODE_OPTIONS=--require "+preload)
	upstreamLog := &syncBuffer{}
	upstream.Stderr, upstream.Stdout = upstreamLog, upstreamLog
	if err := upstream.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { upstream.Process.Kill(); upstream.Wait() })
	if !servicestest.Listening(fmt.Sprintf("127.0.0.1:%d", port), 30*time.Second) {
		t.Fatalf("the everything server does not listen; its output:\n%s", upstreamLog)
	}

	gate := exec.Command(annalBinary, "--server", d.url, "mcp-gate", "--name", "everything", "--type", "echo=execute", "--listen", "127.0.0.1:0",
		"--upstream-url", fmt.Sprintf("http://127.0.0.1:%d/mcp", port))
	gateErr, err := gate.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gate.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Process.Kill(); gate.Wait() })
	gateURL := ""
	sc := bufio.NewScanner(gateErr)
	var gateLog []string
	for gateURL == "" && sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "annal mcp-gate: serving "); ok {
			gateURL = u
		}
		gateLog = append(gateLog, sc.Text())
	}
	if gateURL == "" {
		t.Fatalf("the gate did not say where it serves:\n%s", strings.Join(gateLog, "\n"))
	}
	go func() {
		for sc.Scan() {
		}
	}()

	inspect := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(inspectorCLI, append([]string{"--cli", gateURL, "--transport", "http", "--header", "Authorization: Bearer " + cred}, args...)...)
		// inspector-cli 1.0.3 looks for its package.json relative to the
		// working directory, not to itself: run it from its build folder.
		if real, err := filepath.EvalSymlinks(inspectorCLI); err == nil {
			cmd.Dir = filepath.Dir(real)
		}
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("inspector-cli %v: %v\n%s\n%s", args, err, out, stderr)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("inspector-cli %v printed %s", args, out)
		}
		return v
	}
	tools, _ := json.Marshal(inspect("--method", "tools/list"))
	if !strings.Contains(string(tools), `"name":"echo"`) || !strings.Contains(string(tools), `"name":"get-sum"`) || strings.Contains(string(tools), `"name":"get-env"`) {
		t.Errorf("tools/list through the gate: %s", tools)
	}
	res := inspect("--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=through the gate")
	raw, _ := json.Marshal(res)
	meta, _ := res["_meta"].(map[string]any)
	receipt, _ := meta[agentmcp.MetaReceipt].(map[string]any)
	if res["isError"] == true || !strings.Contains(string(raw), "through the gate") || receipt["result"] == nil {
		t.Fatalf("echo through the gate: %s", raw)
	}
	result, _ := receipt["result"].(map[string]any)
	if result["actor"] != agentID || result["target"] != "mcp/everything/echo" {
		t.Errorf("the receipt in _meta: %v", receipt)
	}
	// Without a credential the gate refuses to serve.
	resp, err := http.Post(gateURL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the gate without a credential: %d", resp.StatusCode)
	}
}

// annal exec as a process: the exit code is the command's, stdin and
// stdout pass through, and a denied command never starts (exit 126).
func TestExecBinaryExitCodesAndPassThrough(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	_, cred := gateAgent(t, d, []api.Grant{{Pattern: "exec/**", Actions: []string{"execute"}}}, nil)
	run := func(stdin string, args ...string) (string, int) {
		cmd := exec.Command(annalBinary, append([]string{"exec"}, args...)...)
		cmd.Env = append(os.Environ(), "ANNAL_SERVER="+d.url, "ANNAL_CREDENTIAL="+cred)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := run("piped in\n", "--", "sh", "-c", "tr a-z A-Z; exit 7"); out != "PIPED IN\n" || code != 7 {
		t.Errorf("stdout %q, exit %d", out, code)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	if _, code := run("", "--target", "elsewhere/sh", "--", "touch", marker); code != 126 {
		t.Errorf("a denied command exited %d", code)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the denied command ran: %v", err)
	}
}
