package kernel

import (
	"context"
	"errors"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracedKernel is a kernel whose decisions are traced by the OpenTelemetry
// SDK into a span recorder, and a tracer of the same provider for the
// request's own span.
func tracedKernel(t *testing.T) (*govKernel, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	g := openGov(t, func(c *Config) { c.Tracer = tp.Tracer("annal-kernel-test") })
	return g, rec, tp.Tracer("request")
}

// spansOf returns the ended spans of trace id by name.
func spansOf(rec *tracetest.SpanRecorder, id trace.TraceID) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == id {
			out[s.Name()] = append(out[s.Name()], s)
		}
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// Seed 002, "Observability Integration": the kernel emits traces. A
// committed action is one decide, one append and one fold span, each a
// child of the request's span, in that order, carrying what a user
// searches by; the event and the receipt carry the request's trace id.
func TestSpec002_Observability_StagesTracedUnderTheRequest(t *testing.T) {
	g, rec, tracer := tracedKernel(t)
	agent := g.enveloped()
	rc, request, err := g.submitTraced(tracer, agent, "workspace/notes.md")
	if err != nil {
		t.Fatal(err)
	}
	id := request.SpanContext().TraceID()
	if rc.TraceID != id.String() {
		t.Fatalf("receipt trace id %q, want %s", rc.TraceID, id)
	}
	ev := g.eventAt(rc.Index)
	if ev.TraceID != id.String() {
		t.Fatalf("the event records trace id %q, want %s", ev.TraceID, id)
	}
	spans := spansOf(rec, id)
	var stages []sdktrace.ReadOnlySpan
	for _, name := range []string{SpanDecide, SpanAppend, SpanFold} {
		if len(spans[name]) != 1 {
			t.Fatalf("%d %s spans, want 1 (spans: %v)", len(spans[name]), name, spans)
		}
		s := spans[name][0]
		if s.Parent().SpanID() != request.SpanContext().SpanID() {
			t.Errorf("%s's parent is %s, not the request's span", name, s.Parent().SpanID())
		}
		stages = append(stages, s)
	}
	for i := 1; i < len(stages); i++ {
		if stages[i].StartTime().Before(stages[i-1].EndTime()) {
			t.Errorf("%s starts at %v, before %s ends at %v", stages[i].Name(), stages[i].StartTime(), stages[i-1].Name(), stages[i-1].EndTime())
		}
	}
	decide := stages[0]
	for key, want := range map[attribute.Key]string{AttrActor: agent.ID, AttrActionType: "mutate", AttrActionTarget: "workspace/notes.md",
		AttrEventKind: "action", AttrEventID: rc.EventID} {
		if v, ok := attrOf(decide, key); !ok || v.AsString() != want {
			t.Errorf("decide span's %s = %q, want %q", key, v.AsString(), want)
		}
	}
	for _, s := range stages[1:] {
		if v, ok := attrOf(s, AttrLogIndex); !ok || v.AsInt64() != int64(rc.Index) {
			t.Errorf("%s span's log index = %d, want %d", s.Name(), v.AsInt64(), rc.Index)
		}
	}
}

// A denied action's decide span names the gate that denied it and is an
// error; the recorded denial event carries the trace id too, and nothing
// of the denied action is appended.
func TestSpec002_Observability_DenialNamesTheGate(t *testing.T) {
	g, rec, tracer := tracedKernel(t)
	agent := g.enveloped()
	_, request, err := g.submitTraced(tracer, agent, "mail/inbox/1")
	var d *Denial
	if !errors.As(err, &d) || !d.Recorded {
		t.Fatalf("want a recorded denial, got %v", err)
	}
	id := request.SpanContext().TraceID()
	spans := spansOf(rec, id)
	if len(spans[SpanDecide]) != 2 {
		t.Fatalf("%d decide spans, want 2 (the action's and its denial's)", len(spans[SpanDecide]))
	}
	refused := spans[SpanDecide][0]
	if refused.Status().Code != codes.Error {
		t.Errorf("the refused decision's span has status %v", refused.Status())
	}
	if v, _ := attrOf(refused, AttrDenialGate); v.AsString() != d.Gate || d.Gate == "" {
		t.Errorf("denial gate attribute %q, the denial's gate %q", v.AsString(), d.Gate)
	}
	if v, _ := attrOf(refused, AttrActionTarget); v.AsString() != "mail/inbox/1" {
		t.Errorf("the refused decision's target attribute is %q", v.AsString())
	}
	if len(spans[SpanAppend]) != 1 {
		t.Errorf("%d append spans, want 1: the denial's", len(spans[SpanAppend]))
	}
	if ev := g.eventAt(d.Index); ev.Kind != event.KindActionDenied || ev.TraceID != id.String() {
		t.Errorf("denial event %s records trace id %q, want %s", ev.Kind, ev.TraceID, id)
	}
}

// Without a tracer nothing is traced, but a caller's own trace context
// (a remote parent, as the server takes it from traceparent) is still
// recorded in the event, so that the caller finds it by its trace id; a
// request without one records none.
func TestSpec002_Observability_CallersTraceRecordedWithoutTracing(t *testing.T) {
	g := openGov(t)
	agent := g.enveloped()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	rc, err := g.Submit(ctx, agent, ActionRequest{Type: event.Mutate, Target: "workspace/a"})
	if err != nil {
		t.Fatal(err)
	}
	if rc.TraceID != tid.String() || g.eventAt(rc.Index).TraceID != tid.String() {
		t.Fatalf("receipt %q, event %q: want the caller's trace id %s", rc.TraceID, g.eventAt(rc.Index).TraceID, tid)
	}
	rc, err = g.Submit(context.Background(), agent, ActionRequest{Type: event.Mutate, Target: "workspace/b"})
	if err != nil {
		t.Fatal(err)
	}
	if rc.TraceID != "" || g.eventAt(rc.Index).TraceID != "" {
		t.Fatalf("an untraced request recorded trace id %q", rc.TraceID)
	}
}

// submitTraced submits a mutate of target by agent in a request span of
// tracer's, ended when the answer comes.
func (g *govKernel) submitTraced(tracer trace.Tracer, agent *Actor, target string) (*Receipt, trace.Span, error) {
	ctx, request := tracer.Start(context.Background(), "POST /v1/actions")
	defer request.End()
	rc, err := g.Submit(ctx, agent, ActionRequest{Type: event.Mutate, Target: target})
	return rc, request, err
}

// enveloped is an agent that may mutate workspace/** under an envelope.
func (g *govKernel) enveloped() *Actor {
	g.t.Helper()
	a, _ := g.agent(1000, "workspace/**:mutate")
	g.envelope(g.root, EnvelopeRequest{Holder: a.ID, Budget: 500, Grants: grants("workspace/**:mutate")})
	return a
}
