package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel"
	"go.opentelemetry.io/otel/trace"
)

// agentTrace is an agent's own trace, as its OpenTelemetry SDK holds it: a
// sampled span context the Go client sends as traceparent.
func agentTrace(t *testing.T, traceID, spanID string) context.Context {
	t.Helper()
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// randomHex is n random bytes in hex.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// spansByName indexes a trace's spans by operation name (the last of each).
func spansByName(tr *servicestest.JaegerTrace) map[string]servicestest.JaegerSpan {
	out := map[string]servicestest.JaegerSpan{}
	if tr != nil {
		for _, s := range tr.Spans {
			out[s.OperationName] = s
		}
	}
	return out
}

// hasSpans is a Trace condition: every name has a span.
func hasSpans(names ...string) func(*servicestest.JaegerTrace) bool {
	return func(tr *servicestest.JaegerTrace) bool {
		got := spansByName(tr)
		for _, n := range names {
			if _, ok := got[n]; !ok {
				return false
			}
		}
		return true
	}
}

// Seed 002, "Observability Integration": annald serve --otlp-endpoint sends
// its traces to a real OTLP receiver (Jaeger, from .ci/services). An
// agent's request with a traceparent continues the agent's trace: Jaeger
// holds the request's span as the child of the agent's, and decide,
// append and fold as children of the request's, with the attributes a user
// searches by. The receipt carries the trace id, and the history (the Go
// client and annal history --trace-id) finds the event by it. A denial's
// decide span names the gate.
func TestSpec002_Observability_TracesReachJaeger(t *testing.T) {
	j := servicestest.NewJaeger(t)
	// The SDK's own variables are honoured: a short batch delay, and a
	// service name of this run's.
	service := fmt.Sprintf("annald-test-%d", time.Now().UnixNano())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_SERVICE_NAME", service)
	d := startDaemon(t, t.TempDir(), "--otlp-endpoint", j.OTLPEndpoint)
	root := d.client(t, d.rootCredential(t))
	ctx := context.Background()
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}
	trust := 0.8
	a, err := root.CreateAgent(ctx, api.AgentRequest{Name: "traced", Purpose: "tracing test", Energy: 1000, Grants: grants, Trust: &trust})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 500, Grants: grants}); err != nil {
		t.Fatal(err)
	}
	agent := d.client(t, a.Credential)

	// Fresh trace ids: the Jaeger of .ci/services keeps every run's spans.
	traceID, deniedTrace := randomHex(t, 16), randomHex(t, 16)
	const agentSpan = "eee19b7ec3c1b174"
	rc, err := agent.Submit(agentTrace(t, traceID, agentSpan), api.ActionRequest{Type: "mutate", Target: "workspace/report.md"})
	if err != nil {
		t.Fatal(err)
	}
	if rc.TraceID != traceID {
		t.Fatalf("receipt trace_id %q, want the agent's %s", rc.TraceID, traceID)
	}
	stages := []string{kernel.SpanDecide, kernel.SpanAppend, kernel.SpanFold}
	tr := j.Trace(t, traceID, 30*time.Second, hasSpans(append([]string{"POST /v1/actions"}, stages...)...))
	spans := spansByName(tr)
	request, ok := spans["POST /v1/actions"]
	if !ok {
		t.Fatalf("Jaeger has no span POST /v1/actions of trace %s: %+v", traceID, tr)
	}
	if request.Parent() != agentSpan {
		t.Errorf("the request's span is the child of %q, not of the agent's span %s", request.Parent(), agentSpan)
	}
	if p := tr.Processes[request.ProcessID]; p.ServiceName != service {
		t.Errorf("service name %q, want %q (OTEL_SERVICE_NAME)", p.ServiceName, service)
	}
	for key, want := range map[string]string{"http.route": "/v1/actions", "http.response.status_code": "200", "annal.actor": a.ID, "annal.outcome": "committed"} {
		if v, _ := request.Tag(key); v != want {
			t.Errorf("request span tag %s = %q, want %q", key, v, want)
		}
	}
	for _, name := range stages {
		s, ok := spans[name]
		if !ok {
			t.Fatalf("Jaeger has no %s span of trace %s", name, traceID)
		}
		if s.Parent() != request.SpanID {
			t.Errorf("%s is the child of %q, not of the request's span %s", name, s.Parent(), request.SpanID)
		}
	}
	decide := spans[kernel.SpanDecide]
	for key, want := range map[string]string{"annal.actor": a.ID, "annal.action.type": "mutate", "annal.action.target": "workspace/report.md", "annal.event.id": rc.EventID} {
		if v, _ := decide.Tag(key); v != want {
			t.Errorf("decide span tag %s = %q, want %q", key, v, want)
		}
	}
	if v, _ := spans[kernel.SpanAppend].Tag("annal.log.index"); v != strconv.FormatUint(rc.Index, 10) {
		t.Errorf("append span's log index %q, the receipt's %d", v, rc.Index)
	}

	// The agent finds its event by its trace id: the Go client, and the CLI.
	page, err := agent.History(ctx, url.Values{"trace_id": {traceID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].Index != rc.Index {
		t.Fatalf("history by trace id: %+v, want the event at %d", page.Events, rc.Index)
	}
	out, err := exec.Command(annalBinary, "--server", d.url, "--credential", a.Credential, "history", "--trace-id", traceID, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("annal history --trace-id: %v\n%s", err, out)
	}
	var cli api.HistoryPage
	if err := json.Unmarshal(out, &cli); err != nil || len(cli.Events) != 1 || cli.Events[0].Index != rc.Index {
		t.Fatalf("annal history --trace-id: %s (%v)", out, err)
	}

	// A denial: the decide span is an error naming the gate.
	_, err = agent.Submit(agentTrace(t, deniedTrace, agentSpan), api.ActionRequest{Type: "mutate", Target: "mail/inbox/1"})
	var denied *client.Error
	if !errors.As(err, &denied) || denied.Gate == "" {
		t.Fatalf("want a denial naming its gate, got %v", err)
	}
	// (Its trace has two: the refused decision's, and the recorded
	// action.denied's.)
	refusedSpan := func(tr *servicestest.JaegerTrace) (servicestest.JaegerSpan, bool) {
		for _, s := range tr.Spans {
			if _, ok := s.Tag("annal.denial.gate"); ok && s.OperationName == kernel.SpanDecide {
				return s, true
			}
		}
		return servicestest.JaegerSpan{}, false
	}
	tr = j.Trace(t, deniedTrace, 30*time.Second, func(tr *servicestest.JaegerTrace) bool {
		_, ok := refusedSpan(tr)
		return ok
	})
	if tr == nil {
		t.Fatalf("Jaeger has no trace %s", deniedTrace)
	}
	refused, ok := refusedSpan(tr)
	if !ok {
		t.Fatalf("no decide span of trace %s names a gate: %+v", deniedTrace, tr.Spans)
	}
	if v, _ := refused.Tag("annal.denial.gate"); v != denied.Gate {
		t.Errorf("the denied decision's span names gate %q, the answer %q", v, denied.Gate)
	}
	if v, _ := refused.Tag("error"); v != "true" {
		t.Errorf("the denied decision's span is not marked as an error: %+v", refused.Tags)
	}
}
