package agentmcp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/blobstore"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/klogtest"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/server"
)

func TestMain(m *testing.M) { klogtest.Main(m) }

// world is a kernel served over HTTP, root's client, and one agent with an
// envelope that holds workspace/release/** for a human.
type world struct {
	url        string
	root       *client.Client
	agentID    string
	agentCred  string
	envelopeID string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	cfg := kernel.DefaultConfig(t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.DisableProduction = true
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blobstore.Open(t.TempDir(), 1<<20, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	h := server.New(k, cfg.Logger)
	h.KeepBlobs(blobs)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); k.Close() })
	raw, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}
	root, err := client.New(srv.URL, strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	trust := 0.8
	a, err := root.CreateAgent(ctx, api.AgentRequest{Name: "mcp-agent", Purpose: "tests the MCP server", Energy: 10_000, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"observe", "create", "mutate", "execute"}}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 1000,
		Grants:          []api.Grant{{Pattern: "workspace/**", Actions: []string{"observe", "create", "mutate", "execute"}}},
		HoldOn:          []api.Grant{{Pattern: "workspace/release/**", Actions: []string{"mutate"}}},
		HoldTimeoutSecs: 600})
	if err != nil {
		t.Fatal(err)
	}
	return &world{url: srv.URL, root: root, agentID: a.ID, agentCred: a.Credential, envelopeID: v.ID}
}

// connect returns an MCP client session to a server acting as the agent.
func (w *world) connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	c, err := client.New(w.url, w.agentCred)
	if err != nil {
		t.Fatal(err)
	}
	serverT, clientT := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := NewServer(c, "test").Connect(ctx, serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its structured content into out.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if out != nil && res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, raw, err)
		}
	}
	return res
}

// readResource reads a resource's text.
func readResource(t *testing.T, cs *mcp.ClientSession, uri string) string {
	t.Helper()
	r, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	return r.Contents[0].Text
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestToolsDescribeThemselves: a model sees every tool with a description
// and an input schema naming its fields, and the server's instructions.
func TestToolsDescribeThemselves(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(t)
	if !strings.Contains(cs.InitializeResult().Instructions, "call submit") {
		t.Errorf("instructions: %q", cs.InitializeResult().Instructions)
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"submit": {"type", "target"}, "wait_hold": {"hold_id"}, "proof": {"index"}, "budget": nil, "record_turn": {"session", "turn_id", "changes"}, "vfs_write": {"uri", "content"}}
	for _, tool := range list.Tools {
		required, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		delete(want, tool.Name)
		if len(tool.Description) < 60 {
			t.Errorf("%s: a description too short to act on: %q", tool.Name, tool.Description)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		for _, field := range required {
			if !strings.Contains(string(schema), `"`+field+`"`) {
				t.Errorf("%s: input schema lacks %q: %s", tool.Name, field, schema)
			}
		}
	}
	for name := range want {
		t.Errorf("tool %q missing", name)
	}
}

// TestWaitHoldSaysWhy: wait_hold tells the agent the reason its human
// logged with the answer, approval or rejection, and that an approval the
// kernel refused on re-check (the agent frozen meanwhile) is not one.
func TestWaitHoldSaysWhy(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(t)
	ctx := context.Background()
	for _, c := range []struct{ decision, reason, status string }{
		{"approve", "ship it after the notes are read", "approved"},
		{"reject", "not before Monday", "rejected"},
	} {
		var held api.Receipt
		call(t, cs, "submit", map[string]any{"type": "mutate", "target": "workspace/release/" + c.decision}, &held)
		if _, err := w.root.AnswerHold(ctx, held.HoldID, c.decision, c.reason); err != nil {
			t.Fatal(err)
		}
		outcome := map[string]any{}
		res := call(t, cs, "wait_hold", map[string]any{"hold_id": held.HoldID}, &outcome)
		if outcome["status"] != c.status || outcome["reason"] != c.reason || !strings.Contains(text(res), c.reason) {
			t.Errorf("%s: wait_hold answered %v %q, want the reason %q", c.decision, outcome, text(res), c.reason)
		}
	}
	var held api.Receipt
	call(t, cs, "submit", map[string]any{"type": "mutate", "target": "workspace/release/frozen"}, &held)
	if _, err := w.root.SetStatus(ctx, w.agentID, "frozen", "review"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.root.AnswerHold(ctx, held.HoldID, "approve", "fine"); err == nil {
		t.Fatal("approving the hold of a frozen agent answered no error")
	}
	outcome := map[string]any{}
	res := call(t, cs, "wait_hold", map[string]any{"hold_id": held.HoldID}, &outcome)
	if outcome["status"] != "approve_failed" || !strings.Contains(text(res), "refused on re-check") || !strings.Contains(text(res), "Do not perform it") {
		t.Errorf("refused approval: wait_hold answered %v %q", outcome, text(res))
	}
}

// TestSubmitCommittedDeniedHeld: an allowed action is logged and its
// receipt answered; a denied one is a tool error naming stage, gate and
// reason with where the refusal was logged; a held one answers its hold id,
// and wait_hold returns once a human approved it.
func TestSubmitCommittedDeniedHeld(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(t)
	ctx := context.Background()

	var rc api.Receipt
	res := call(t, cs, "submit", map[string]any{"type": "mutate", "target": "workspace/notes.md", "payload": map[string]any{"lines": 3}}, &rc)
	if res.IsError || rc.Status != "committed" || rc.Actor != w.agentID || !strings.Contains(text(res), "You may perform it") {
		t.Fatalf("allowed submit: %v %+v %q", res.IsError, rc, text(res))
	}
	ev, err := w.root.Event(ctx, rc.Index)
	if err != nil || !strings.Contains(string(ev), `"payload":{"lines":3}`) {
		t.Errorf("the logged event: %s %v", ev, err)
	}

	var refused Refusal
	res = call(t, cs, "submit", map[string]any{"type": "mutate", "target": "secrets/keys"}, &refused)
	if !res.IsError || refused.Stage == "" || refused.Gate == "" || refused.DenialIndex == nil || refused.Retry {
		t.Fatalf("denied submit: %v %+v", res.IsError, refused)
	}
	if msg := text(res); !strings.Contains(msg, "denied") || !strings.Contains(msg, "gate "+refused.Gate) || !strings.Contains(msg, "logged at index") {
		t.Errorf("the denial a model reads: %q", msg)
	}

	var held api.Receipt
	res = call(t, cs, "submit", map[string]any{"type": "mutate", "target": "workspace/release/v1"}, &held)
	if res.IsError || held.Status != "held" || held.HoldID == "" || !strings.Contains(text(res), "wait_hold") {
		t.Fatalf("held submit: %+v %q", held, text(res))
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := w.root.AnswerHold(ctx, held.HoldID, "approve", "ok"); err != nil {
			t.Errorf("approve: %v", err)
		}
	}()
	var outcome HoldOutcome
	res = call(t, cs, "wait_hold", map[string]any{"hold_id": held.HoldID, "timeout_seconds": 30}, &outcome)
	if res.IsError || outcome.Status != "approved" || outcome.AnsweredBy != "root" {
		t.Fatalf("wait_hold: %+v %q", outcome, text(res))
	}
	// Rejected: wait_hold says so.
	res = call(t, cs, "submit", map[string]any{"type": "mutate", "target": "workspace/release/v2"}, &held)
	if _, err := w.root.AnswerHold(ctx, held.HoldID, "reject", "no"); err != nil {
		t.Fatal(err)
	}
	res = call(t, cs, "wait_hold", map[string]any{"hold_id": held.HoldID}, &outcome)
	if outcome.Status != "rejected" || !strings.Contains(text(res), "Do not perform it") {
		t.Errorf("rejected hold: %+v %q", outcome, text(res))
	}
	res = call(t, cs, "wait_hold", map[string]any{"hold_id": "hold-0000000000000000"}, nil)
	if !res.IsError {
		t.Errorf("wait_hold of an unknown hold: %q", text(res))
	}
	// Arguments the schema refuses never reach the kernel.
	res = call(t, cs, "submit", map[string]any{"target": "workspace/x"}, nil)
	if !res.IsError {
		t.Errorf("submit without type: %q", text(res))
	}
}

// TestProofBudgetRecordTurn: proof answers a tlog-proof; budget the
// caller's balance, envelopes and rate limit; record_turn logs a delta.
func TestProofBudgetRecordTurn(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(t)
	ctx := context.Background()
	var rc api.Receipt
	call(t, cs, "submit", map[string]any{"type": "create", "target": "workspace/a.md"}, &rc)
	res := call(t, cs, "proof", map[string]any{"index": rc.Index, "wait": true}, nil)
	if res.IsError || !strings.HasPrefix(text(res), "c2sp.org/tlog-proof@v1\n") {
		t.Fatalf("proof: %q", text(res))
	}
	var b Budget
	res = call(t, cs, "budget", map[string]any{}, &b)
	if res.IsError || b.Actor != w.agentID || len(b.Envelopes) != 1 || b.Envelopes[0].ID != w.envelopeID || b.Envelopes[0].Remaining >= 1000 {
		t.Fatalf("budget: %+v %q", b, text(res))
	}
	var ring struct {
		Effective int `json:"effective_ring"`
		RateLimit struct {
			Rate, Burst, Tokens float64
		} `json:"rate_limit"`
	}
	if err := json.Unmarshal(b.Ring, &ring); err != nil || ring.Effective != 2 || ring.RateLimit.Burst == 0 || ring.RateLimit.Tokens > ring.RateLimit.Burst {
		t.Errorf("budget's ring: %s", b.Ring)
	}

	// A session the agent takes part in.
	if _, err := w.root.CreateSession(ctx, api.SessionRequest{ID: "s-mcp"}); err != nil {
		t.Fatal(err)
	}
	agent, _ := client.New(w.url, w.agentCred)
	for _, step := range []struct {
		c   *client.Client
		req api.SessionChangeRequest
	}{{w.root, api.SessionChangeRequest{Op: "state", State: "HANDSHAKING"}}, {agent, api.SessionChangeRequest{Op: "join"}}, {w.root, api.SessionChangeRequest{Op: "state", State: "ACTIVE"}}} {
		if _, err := step.c.ChangeSession(ctx, "s-mcp", step.req); err != nil {
			t.Fatal(err)
		}
	}
	hash := "sha256:" + strings.Repeat("ab", 32)
	res = call(t, cs, "record_turn", map[string]any{"session": "s-mcp", "turn_id": "turn-1",
		"changes": []map[string]any{{"path": "src/main.go", "operation": "create", "content_hash": hash}}}, nil)
	if res.IsError || !strings.Contains(text(res), "logged at index") {
		t.Fatalf("record_turn: %q", text(res))
	}
	// The session's files at its latest turn, as a resource.
	read := func(uri string) string { t.Helper(); return readResource(t, cs, uri) }
	if got := read("vfs://sessions/s-mcp/"); !strings.Contains(got, `"path": "src/main.go"`) || !strings.Contains(got, hash) {
		t.Errorf("the session's tree: %s", got)
	}
	if got := read("vfs://sessions/s-mcp/src/main.go"); !strings.Contains(got, hash) {
		t.Errorf("a session file: %s", got)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "vfs://sessions/s-mcp/nope.go"}); err == nil {
		t.Error("a file the session does not have was read")
	}
	res = call(t, cs, "record_turn", map[string]any{"session": "s-mcp", "turn_id": "turn-1",
		"changes": []map[string]any{{"path": "src/main.go", "operation": "create", "content_hash": hash}}}, nil)
	if !res.IsError {
		t.Errorf("a turn that creates an existing file again was recorded: %q", text(res))
	}
}

// TestResources: the checkpoint, events by index, the caller's history
// and the policies that bind it.
func TestResources(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(t)
	ctx := context.Background()
	var rc api.Receipt
	call(t, cs, "submit", map[string]any{"type": "observe", "target": "workspace/r"}, &rc)
	raw, _ := json.Marshal(map[string]any{"name": "no_secrets", "blocked_actions": []string{}, "blocked_patterns": []string{"password"}})
	if _, err := w.root.SetPolicy(ctx, "no_secrets", raw); err != nil {
		t.Fatal(err)
	}
	raw, _ = json.Marshal(map[string]any{"name": "unrelated", "blocked_actions": []string{}, "blocked_patterns": []string{"x"}})
	if _, err := w.root.SetPolicy(ctx, "unrelated", raw); err != nil {
		t.Fatal(err)
	}
	if _, err := w.root.AttachPolicy(ctx, "no_secrets", api.AttachRequest{Envelope: w.envelopeID}); err != nil {
		t.Fatal(err)
	}
	read := func(uri string) string { t.Helper(); return readResource(t, cs, uri) }
	if cp := read("annal://checkpoint"); !strings.HasPrefix(cp, "annal.local/") {
		t.Errorf("checkpoint: %q", cp)
	}
	if ev := read("annal://events/" + itoa(rc.Index)); !strings.Contains(ev, `"target":"workspace/r"`) {
		t.Errorf("event: %s", ev)
	}
	if h := read("annal://history"); !strings.Contains(h, "workspace/r") || strings.Contains(h, `"kind":"log.genesis"`) {
		t.Errorf("the agent's history: %s", h)
	}
	if p := read("annal://policies"); !strings.Contains(p, "no_secrets") || strings.Contains(p, "unrelated") {
		t.Errorf("the policies that bind the agent: %s", p)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "annal://events/999999"}); err == nil {
		t.Error("an event past the log was read")
	}
	// The policy now refuses an action: a tool error naming it.
	res := call(t, cs, "submit", map[string]any{"type": "mutate", "target": "workspace/cfg", "payload": map[string]any{"password": "hunter2"}}, nil)
	if !res.IsError || !strings.Contains(text(res), "no_secrets") {
		t.Errorf("an action the policy blocks: %q", text(res))
	}
	resources, err := cs.ListResources(ctx, nil)
	if err != nil || len(resources.Resources) != 3 {
		t.Errorf("resources: %+v %v", resources, err)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 3 {
		t.Errorf("templates: %+v %v", templates, err)
	}
}

// TestHTTPHandler: /mcp needs a bearer credential that belongs to an actor,
// and then acts as it.
func TestHTTPHandler(t *testing.T) {
	w := newWorld(t)
	mcpSrv := httptest.NewServer(HTTPHandler(proxyTo(w.url), "test"))
	defer mcpSrv.Close()
	resp, err := http.Post(mcpSrv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no bearer: %d", resp.StatusCode)
	}
	ctx := context.Background()
	connect := func(cred string) (*mcp.ClientSession, error) {
		hc := &http.Client{Transport: bearerTransport{cred: cred}}
		return mcp.NewClient(&mcp.Implementation{Name: "http-agent", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpSrv.URL, HTTPClient: hc}, nil)
	}
	if _, err := connect("annal-not-a-credential"); err == nil {
		t.Error("a wrong credential connected")
	}
	cs, err := connect(w.agentCred)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var rc api.Receipt
	res := call(t, cs, "submit", map[string]any{"type": "mutate", "target": "workspace/over-http"}, &rc)
	if res.IsError || rc.Status != "committed" || rc.Actor != w.agentID || rc.TraceID != "" {
		t.Fatalf("submit over HTTP: %q %+v", text(res), rc)
	}
	// The caller's traceparent reaches the event an MCP call leads to.
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	hc := &http.Client{Transport: bearerTransport{w.agentCred, "00-" + traceID + "-00f067aa0ba902b7-01"}}
	traced, err := mcp.NewClient(&mcp.Implementation{Name: "traced-agent", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpSrv.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	res = call(t, traced, "submit", map[string]any{"type": "mutate", "target": "workspace/traced"}, &rc)
	if res.IsError || rc.TraceID != traceID {
		t.Fatalf("an MCP call with a traceparent: %q, trace_id %q", text(res), rc.TraceID)
	}
}

type bearerTransport struct{ cred, traceparent string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.cred)
	if b.traceparent != "" {
		r.Header.Set("Traceparent", b.traceparent)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// proxyTo forwards requests to the test kernel's server, as annald's own
// API handler would answer them.
func proxyTo(base string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), r.Body)
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	})
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }
