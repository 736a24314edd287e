package agentmcp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/execute"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/server"
)

// upstream is an MCP server the gate sits in front of, in process: write
// (not read-only) and peek (read-only) answer their argument back, big
// answers 4 KiB; calls counts what reached it.
type upstream struct {
	calls atomic.Int64
	srv   *mcp.Server
}

type echoIn struct {
	Text string `json:"text"`
}

func newUpstream() *upstream {
	u := &upstream{srv: mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)}
	answer := func(text string) (*mcp.CallToolResult, any, error) {
		u.calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	}
	mcp.AddTool(u.srv, &mcp.Tool{Name: "write", Description: "writes"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return answer("wrote " + in.Text)
	})
	mcp.AddTool(u.srv, &mcp.Tool{Name: "peek", Description: "reads", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return answer("saw " + in.Text)
		})
	mcp.AddTool(u.srv, &mcp.Tool{Name: "big", Description: "answers 4 KiB"}, func(_ context.Context, _ *mcp.CallToolRequest, _ echoIn) (*mcp.CallToolResult, any, error) {
		return answer(strings.Repeat("x", 4096))
	})
	return u
}

// connect returns a client session straight to the upstream server.
func (u *upstream) connect(tb testing.TB) *mcp.ClientSession {
	tb.Helper()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := u.srv.Connect(context.Background(), st, nil); err != nil {
		tb.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// gateWorld is a kernel over HTTP, an agent granted grants under an
// envelope of budget, and the upstream server behind a gate acting as it.
type gateWorld struct {
	up    *upstream
	agent *client.Client
	root  *client.Client
	gate  *mcp.ClientSession
}

func newGateWorld(tb testing.TB, budget uint64, cfg GateConfig, grants ...api.Grant) *gateWorld {
	tb.Helper()
	kcfg := kernel.DefaultConfig(tb.TempDir())
	kcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	kcfg.DisableProduction = true
	_, kcfg.DisableRateLimit = tb.(*testing.B) // a benchmark measures latency, not the agent's rate limit
	k, err := kernel.Open(kcfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(server.New(k, kcfg.Logger))
	tb.Cleanup(func() { srv.Close(); k.Close() })
	raw, _ := os.ReadFile(k.RootCredentialPath())
	root, _ := client.New(srv.URL, strings.TrimSpace(string(raw)))
	ctx := context.Background()
	trust := 0.8
	a, err := root.CreateAgent(ctx, api.AgentRequest{Name: "gated", Purpose: "gate tests", Energy: 900_000, Trust: &trust, Grants: grants})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: budget, Grants: grants}); err != nil {
		tb.Fatal(err)
	}
	agent, _ := client.New(srv.URL, a.Credential)
	w := &gateWorld{up: newUpstream(), agent: agent, root: root}
	st, ct := mcp.NewInMemoryTransports()
	if _, err := w.up.srv.Connect(ctx, st, nil); err != nil {
		tb.Fatal(err)
	}
	if cfg.Name == "" {
		cfg.Name = "up"
	}
	g, err := ConnectGate(ctx, ct, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	s, err := g.Server(ctx, agent, true)
	if err != nil {
		tb.Fatal(err)
	}
	st2, ct2 := mcp.NewInMemoryTransports()
	if _, err := s.Connect(ctx, st2, nil); err != nil {
		tb.Fatal(err)
	}
	w.gate, err = mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct2, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.gate.Close() })
	return w
}

func (w *gateWorld) call(tb testing.TB, tool string, args any) *mcp.CallToolResult {
	tb.Helper()
	res, err := w.gate.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

var upGrants = []api.Grant{{Pattern: "mcp/up/**", Actions: []string{"observe", "execute"}}}

// Arguments too large for the log are refused inline, before the server;
// with --arguments hash the call is made and only their OID is logged.
func TestGate_LargeArguments(t *testing.T) {
	w := newGateWorld(t, 10_000, GateConfig{}, upGrants...)
	big := strings.Repeat("a", maxInlineArguments)
	if res := w.call(t, "write", map[string]any{"text": big}); !res.IsError || !strings.Contains(resultText(res), "--arguments hash") {
		t.Fatalf("inline large arguments: %s", resultText(res))
	}
	if n := w.up.calls.Load(); n != 0 {
		t.Fatalf("the server saw %d calls", n)
	}
	h := newGateWorld(t, 10_000, GateConfig{Arguments: ArgumentsHash}, upGrants...)
	res := h.call(t, "write", map[string]any{"text": big})
	if res.IsError || h.up.calls.Load() != 1 {
		t.Fatalf("hashed large arguments: %s", resultText(res))
	}
	raw, _ := json.Marshal(res.Meta[MetaReceipt])
	var r struct{ Intent uint64 }
	json.Unmarshal(raw, &r)
	entry, err := h.root.Event(context.Background(), r.Intent)
	if err != nil || strings.Contains(string(entry), big[:100]) || !strings.Contains(string(entry), `"input_oid"`) {
		t.Fatalf("the intent logs the arguments it should only hash: %.300s %v", entry, err)
	}
}

// A call whose result cannot be committed is reported as failed, and the
// server's answer is withheld: here the envelope can pay the intent (25)
// but not the 4 KiB output (16 more).
func TestGate_UnrecordedResultIsAFailure(t *testing.T) {
	w := newGateWorld(t, 30, GateConfig{}, upGrants...)
	res := w.call(t, "big", map[string]any{"text": "x"})
	if !res.IsError || !strings.Contains(resultText(res), "could not be recorded") || strings.Contains(resultText(res), "xxxx") {
		t.Fatalf("an unrecorded result: %s", resultText(res))
	}
	if w.up.calls.Load() != 1 {
		t.Fatalf("the call should have run once, ran %d", w.up.calls.Load())
	}
}

// An observe tool is logged as an observe; a tool the agent has no grant
// for is not listed and cannot be called.
func TestGate_ReadOnlyIsObserveAndGrantsFilter(t *testing.T) {
	w := newGateWorld(t, 10_000, GateConfig{}, api.Grant{Pattern: "mcp/up/peek", Actions: []string{"observe"}})
	var names []string
	for tool, err := range w.gate.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"peek"}) {
		t.Fatalf("tools shown: %v", names)
	}
	res := w.call(t, "peek", map[string]any{"text": "a"})
	raw, _ := json.Marshal(res.Meta[MetaReceipt])
	if res.IsError || !strings.Contains(string(raw), `"type":"observe"`) {
		t.Fatalf("peek: %s %s", resultText(res), raw)
	}
	if _, err := w.gate.CallTool(context.Background(), &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"text": "a"}}); err == nil {
		t.Fatal("a tool not shown was callable")
	}
	if w.up.calls.Load() != 1 {
		t.Fatalf("the server saw %d calls", w.up.calls.Load())
	}
}

// BenchmarkGateAddedLatency: one agent's tool calls straight to the server
// and through the gate (kernel over HTTP on loopback, in process),
// interleaved with the kernel work alone that a gated call waits for — an
// execute tool's intent and result (two commits), a read-only tool's
// observe (one). Reports p50/p99 of each, what the gate adds, and what it
// adds beyond those commits (its own cost).
func BenchmarkGateAddedLatency(b *testing.B) {
	for _, tool := range []string{"write", "peek"} {
		b.Run(tool, func(b *testing.B) {
			w := newGateWorld(b, 900_000, GateConfig{}, upGrants...)
			direct := w.up.connect(b)
			ctx := context.Background()
			args := map[string]any{"text": "hello"}
			oid := "sha256:" + strings.Repeat("0", 64)
			commits := func() error {
				if tool == "peek" {
					_, err := w.agent.Submit(ctx, api.ActionRequest{Type: "observe", Target: "mcp/up/peek", Payload: json.RawMessage(`{"input_oid":"` + oid + `"}`)})
					return err
				}
				in, err := w.agent.DecideIntent(ctx, "mcp/up/write", "", "", oid, nil, nil, time.Millisecond)
				if err == nil {
					_, err = w.agent.RecordResult(ctx, in, execute.Result{OutputOID: oid, ArtifactHash: oid})
				}
				return err
			}
			var viaDirect, viaGate, kernelOnly []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := direct.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil {
					b.Fatal(err)
				}
				viaDirect = append(viaDirect, time.Since(start))
				start = time.Now()
				res, err := w.gate.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil || res.IsError {
					b.Fatalf("%v %s", err, resultText(res))
				}
				viaGate = append(viaGate, time.Since(start))
				start = time.Now()
				if err := commits(); err != nil {
					b.Fatal(err)
				}
				kernelOnly = append(kernelOnly, time.Since(start))
			}
			b.StopTimer()
			d50, d99 := percentiles(viaDirect)
			g50, g99 := percentiles(viaGate)
			k50, _ := percentiles(kernelOnly)
			b.ReportMetric(float64(d50.Microseconds()), "direct-p50-µs")
			b.ReportMetric(float64(d99.Microseconds()), "direct-p99-µs")
			b.ReportMetric(float64(g50.Microseconds()), "gate-p50-µs")
			b.ReportMetric(float64(g99.Microseconds()), "gate-p99-µs")
			b.ReportMetric(float64((g50 - d50).Microseconds()), "added-p50-µs")
			b.ReportMetric(float64((g99 - d99).Microseconds()), "added-p99-µs")
			b.ReportMetric(float64(k50.Microseconds()), "commits-p50-µs")
			b.ReportMetric(float64((g50 - d50 - k50).Microseconds()), "gate-own-p50-µs")
		})
	}
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}
