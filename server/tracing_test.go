package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracedServer is a server and kernel traced by the OpenTelemetry SDK into
// a span recorder (nil rec: neither traces), its root client, and an
// agent's client that may mutate workspace/**.
type tracedServer struct {
	srv            *httptest.Server
	root           *client.Client
	rootCredential string
	agent          *client.Client
	rec            *tracetest.SpanRecorder
}

func newTracedServer(t testing.TB, traced bool) *tracedServer {
	t.Helper()
	cfg := kernel.DefaultConfig(t.TempDir())
	cfg.Logger = discardLogger()
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.DisableProduction = true
	ts := &tracedServer{}
	var tracer trace.Tracer
	if traced {
		ts.rec = tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(ts.rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		tracer = tp.Tracer("annald")
		cfg.Tracer = tracer
	}
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := New(k, cfg.Logger)
	if tracer != nil {
		s.Trace(tracer)
	}
	ts.srv = httptest.NewServer(s)
	t.Cleanup(func() {
		ts.srv.Close()
		if err := k.Close(); err != nil {
			t.Errorf("close kernel: %v", err)
		}
	})
	raw, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}
	ts.rootCredential = strings.TrimSpace(string(raw))
	if ts.root, err = client.New(ts.srv.URL, ts.rootCredential); err != nil {
		t.Fatal(err)
	}
	if ts.agent, err = client.New(ts.srv.URL, agentCredential(t, ts)); err != nil {
		t.Fatal(err)
	}
	return ts
}

// callerContext is an agent's own trace, as its OpenTelemetry SDK would
// hold it: a sampled span context the client sends as traceparent.
func callerContext(traceID, spanID string) context.Context {
	tid, _ := trace.TraceIDFromHex(traceID)
	sid, _ := trace.SpanIDFromHex(spanID)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// findByTrace reads the history's events of one trace.
func findByTrace(t *testing.T, c *client.Client, traceID string) []api.HistoryItem {
	t.Helper()
	page, err := c.History(context.Background(), url.Values{"trace_id": {traceID}})
	if err != nil {
		t.Fatal(err)
	}
	return page.Events
}

// Seed 002, "Observability Integration", and the ExecutionResult's
// trace_id: an agent's trace continues through the server (the request's
// span is the child of the caller's) into the kernel (decide, append and
// fold are the request span's children); the receipt carries the caller's
// trace id, and the history finds the event by it.
func TestSpec002_Observability_CallersTraceContinuesThroughTheKernel(t *testing.T) {
	ts := newTracedServer(t, true)
	const traceID, parentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	rc, err := ts.agent.Submit(callerContext(traceID, parentSpan), api.ActionRequest{Type: "mutate", Target: "workspace/plan.md"})
	if err != nil {
		t.Fatal(err)
	}
	if rc.TraceID != traceID {
		t.Fatalf("receipt trace_id %q, want the caller's %s", rc.TraceID, traceID)
	}
	var request sdktrace.ReadOnlySpan
	stages := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range ts.rec.Ended() {
		if s.SpanContext().TraceID().String() != traceID {
			continue
		}
		switch s.Name() {
		case "POST /v1/actions":
			request = s
		case kernel.SpanDecide, kernel.SpanAppend, kernel.SpanFold:
			stages[s.Name()] = s
		}
	}
	if request == nil {
		t.Fatal("no span named POST /v1/actions in the caller's trace")
	}
	if request.Parent().SpanID().String() != parentSpan || !request.Parent().IsRemote() || request.SpanKind() != trace.SpanKindServer {
		t.Errorf("the request's span has parent %s (remote %v), kind %v: want the caller's %s", request.Parent().SpanID(), request.Parent().IsRemote(), request.SpanKind(), parentSpan)
	}
	want := map[attribute.Key]string{"http.route": "/v1/actions", kernel.AttrOutcome: "committed", kernel.AttrActor: rc.Actor}
	for _, kv := range request.Attributes() {
		if w, ok := want[kv.Key]; ok && kv.Value.Emit() == w {
			delete(want, kv.Key)
		}
		if kv.Key == "http.response.status_code" && kv.Value.AsInt64() != http.StatusOK {
			t.Errorf("status code attribute %d", kv.Value.AsInt64())
		}
	}
	if len(want) > 0 {
		t.Errorf("the request's span lacks %v (has %v)", want, request.Attributes())
	}
	for _, name := range []string{kernel.SpanDecide, kernel.SpanAppend, kernel.SpanFold} {
		s, ok := stages[name]
		if !ok {
			t.Fatalf("no %s span in the caller's trace", name)
		}
		if s.Parent().SpanID() != request.SpanContext().SpanID() {
			t.Errorf("%s's parent is %s, not the request's span %s", name, s.Parent().SpanID(), request.SpanContext().SpanID())
		}
	}
	events := findByTrace(t, ts.agent, traceID)
	if len(events) != 1 || events[0].Index != rc.Index || !strings.Contains(string(events[0].Event), `"trace_id":"`+traceID+`"`) {
		t.Fatalf("history by trace id: %+v, want the event at %d", events, rc.Index)
	}
}

// A request without a traceparent, to a server that traces, begins a
// trace of its own: its id is the receipt's and the event's.
func TestSpec002_Observability_ServerBeginsATrace(t *testing.T) {
	ts := newTracedServer(t, true)
	rc, err := ts.agent.Submit(context.Background(), api.ActionRequest{Type: "mutate", Target: "workspace/b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.TraceID) != 32 {
		t.Fatalf("receipt trace_id %q", rc.TraceID)
	}
	found := false
	for _, s := range ts.rec.Ended() {
		if s.Name() == "POST /v1/actions" && s.SpanContext().TraceID().String() == rc.TraceID {
			found = !s.Parent().IsValid()
		}
	}
	if !found {
		t.Fatal("no root span of the request in the receipt's trace")
	}
	if events := findByTrace(t, ts.root, rc.TraceID); len(events) != 1 || events[0].Index != rc.Index {
		t.Fatalf("history by trace id: %+v", events)
	}
}

// Tracing off: the caller's traceparent is still recorded and found, and
// a request without one records no trace id.
func TestSpec002_Observability_TraceparentRecordedWhenNotTracing(t *testing.T) {
	ts := newTracedServer(t, false)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	rc, err := ts.agent.Submit(callerContext(traceID, "00f067aa0ba902b7"), api.ActionRequest{Type: "mutate", Target: "workspace/c"})
	if err != nil {
		t.Fatal(err)
	}
	if rc.TraceID != traceID {
		t.Fatalf("receipt trace_id %q, want %s", rc.TraceID, traceID)
	}
	if events := findByTrace(t, ts.agent, traceID); len(events) != 1 || events[0].Index != rc.Index {
		t.Fatalf("history by trace id: %+v", events)
	}
	plain, err := ts.agent.Submit(context.Background(), api.ActionRequest{Type: "mutate", Target: "workspace/d"})
	if err != nil || plain.TraceID != "" {
		t.Fatalf("untraced request: trace_id %q, %v", plain.TraceID, err)
	}
	// A malformed traceparent is no trace: the action is taken, untraced.
	req, _ := http.NewRequest(http.MethodPost, ts.srv.URL+"/v1/actions", strings.NewReader(`{"type":"mutate","target":"workspace/e"}`))
	req.Header.Set("Traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01")
	req.Header.Set("Authorization", "Bearer "+agentCredential(t, ts))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out api.Receipt
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.TraceID != "" {
		t.Fatalf("an all-zero traceparent: status %d, trace_id %q, %v", resp.StatusCode, out.TraceID, err)
	}
}

// A trace id filter that is not a trace id is refused, not answered with
// an empty page.
func TestHistory_TraceIDFilterChecked(t *testing.T) {
	ts := newTracedServer(t, false)
	for _, bad := range []string{"00000000000000000000000000000000", "0AF7651916CD43DD8448EB211C80319C", "abc"} {
		_, err := ts.root.History(context.Background(), url.Values{"trace_id": {bad}})
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, "trace_id") {
			t.Errorf("trace_id=%s: %v, want 400 naming trace_id", bad, err)
		}
	}
}

// A traced server still streams the history (its writer flushes through).
func TestSpec002_Observability_StreamWhileTraced(t *testing.T) {
	ts := newTracedServer(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	from := uint64(0)
	got := make(chan api.HistoryItem, 1)
	go func() {
		_ = ts.root.Stream(ctx, url.Values{}, &from, func(it api.HistoryItem) error {
			select {
			case got <- it:
			default:
			}
			return nil
		})
	}()
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("no event streamed from a traced server")
	}
}

// agentCredential is the credential of a fresh agent that may mutate
// workspace/** under an envelope.
func agentCredential(t testing.TB, ts *tracedServer) string {
	t.Helper()
	trust := 0.8
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}
	a, err := ts.root.CreateAgent(context.Background(), api.AgentRequest{Name: "traced", Purpose: "test", Energy: 1000, Grants: grants, Trust: &trust})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.root.IssueEnvelope(context.Background(), api.EnvelopeRequest{Holder: a.ID, Budget: 500, Grants: grants}); err != nil {
		t.Fatal(err)
	}
	return a.Credential
}

// FuzzTraceparent: whatever a traceparent header holds, the action is
// taken (a malformed one is no trace, as W3C Trace Context says), and the
// receipt's trace id is either none or a valid trace id the header holds.
func FuzzTraceparent(f *testing.F) {
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
		"",
		"garbage",
	} {
		f.Add(s)
	}
	ts := newTracedServer(f, false)
	f.Fuzz(func(t *testing.T, traceparent string) {
		req, err := http.NewRequest(http.MethodPost, ts.srv.URL+"/v1/actions", strings.NewReader(`{"type":"observe","target":"workspace/fuzz"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header["Traceparent"] = []string{traceparent}
		req.Header.Set("Authorization", "Bearer "+ts.rootCredential)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // a header value net/http will not send
		}
		defer resp.Body.Close()
		var out api.Receipt
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("traceparent %q: status %d, %v", traceparent, resp.StatusCode, err)
		}
		if out.TraceID != "" && (!event.ValidTraceID(out.TraceID) || !strings.Contains(traceparent, out.TraceID)) {
			t.Fatalf("traceparent %q gave trace id %q", traceparent, out.TraceID)
		}
	})
}

// A refusal answers the request's trace id too, and the denial it records
// carries it: an agent whose call was refused finds the refusal in the log
// by its own trace.
func TestSpec002_Observability_RefusalAnswersItsTraceID(t *testing.T) {
	ts := newTracedServer(t, false)
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	_, err := ts.agent.Submit(callerContext(traceID, "b7ad6b7169203331"), api.ActionRequest{Type: "mutate", Target: "elsewhere/x"})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusForbidden || e.TraceID != traceID || e.DenialIndex == nil {
		t.Fatalf("a refused request with a traceparent: %v", err)
	}
	events := findByTrace(t, ts.agent, traceID)
	if len(events) != 1 || events[0].Index != *e.DenialIndex {
		t.Fatalf("history by the refusal's trace id: %+v, denial at %d", events, *e.DenialIndex)
	}
}
