package kernel

import (
	"context"
	"errors"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Traces (seed 002, "Kernel automatically emits metrics and traces"). With
// Config.Tracer set, every decision's way to the log is traced as three
// spans, each a child of the span in the request's context (the server's
// span of the HTTP request, itself the child of the caller's traceparent):
//
//   - SpanDecide: build the event, take its claims (waiting while they are
//     busy), run its kind's rule; a denial names its stage and gate;
//   - SpanAppend: encode the entry and make it durable with its group
//     (the write-ahead log's fsync, or Tessera's batch);
//   - SpanFold: from durable to folded into the ledger (the fold stage's
//     queue, the kernel's lock, the fold), which the answer waits for.
//
// A decision the sequencer sends back (commit.go) has a second decide and
// append. Without a tracer nothing is traced and nothing is spent: one nil
// check per stage.
//
// Independently of tracing, an event records the trace id of the request
// that led to it (event.Event.TraceID): the caller's, from the span context
// in ctx, so that an agent finds its event by its own trace.

// The kernel's span names.
const (
	SpanDecide = "annal.decide"
	SpanAppend = "annal.append"
	SpanFold   = "annal.fold"
)

// The attributes of the kernel's spans, by which a trace is searched: who
// acted, what, and what became of it. The server puts the same ones on the
// request's span.
const (
	AttrActor        = attribute.Key("annal.actor")
	AttrEventKind    = attribute.Key("annal.event.kind")
	AttrEventID      = attribute.Key("annal.event.id")
	AttrActionType   = attribute.Key("annal.action.type")
	AttrActionTarget = attribute.Key("annal.action.target")
	AttrEnvelope     = attribute.Key("annal.envelope")
	AttrSession      = attribute.Key("annal.session")
	AttrOutcome      = attribute.Key("annal.outcome")
	AttrDenialStage  = attribute.Key("annal.denial.stage")
	AttrDenialGate   = attribute.Key("annal.denial.gate")
	AttrDenialPolicy = attribute.Key("annal.denial.policy")
	AttrLogIndex     = attribute.Key("annal.log.index")
	AttrEntryBytes   = attribute.Key("annal.entry.bytes")
	// AttrClaimsWaits counts the times a decision waited for claims other
	// decisions in flight held.
	AttrClaimsWaits = attribute.Key("annal.claims.waits")
)

// traceIDOf is the trace id of the span context in ctx, as an event
// records it, or "" when ctx carries none.
func traceIDOf(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.TraceID().IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// stageSpan is one stage's span; the zero stageSpan (no tracer) does
// nothing.
type stageSpan struct{ span trace.Span }

// startStage starts a stage's span under ctx's span, at start when it is
// not zero.
func (k *Kernel) startStage(ctx context.Context, name string, start time.Time) stageSpan {
	if k.cfg.Tracer == nil {
		return stageSpan{}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	_, span := k.cfg.Tracer.Start(ctx, name, opts...)
	return stageSpan{span}
}

// waited notes that the decision waited for busy claims.
func (s stageSpan) waited(waits int) {
	if s.span != nil {
		s.span.SetAttributes(AttrClaimsWaits.Int(waits))
	}
}

// decided ends the decide span: what ev records (nil if it was never
// built) and, on a refusal, its stage and gate.
func (s stageSpan) decided(ev *event.Event, err error) {
	if s.span == nil {
		return
	}
	if ev != nil {
		s.span.SetAttributes(eventAttributes(ev)...)
	}
	s.fail(err)
	s.span.End()
}

// appended ends the append span at written (now when zero).
func (s stageSpan) appended(index uint64, entry []byte, written time.Time, err error) {
	if s.span == nil {
		return
	}
	if err == nil {
		s.span.SetAttributes(AttrLogIndex.Int64(int64(index)), AttrEntryBytes.Int(len(entry)))
	}
	s.fail(err)
	s.endAt(written)
}

// folded ends the fold span.
func (s stageSpan) folded(index uint64) {
	if s.span == nil {
		return
	}
	s.span.SetAttributes(AttrLogIndex.Int64(int64(index)))
	s.span.End()
}

func (s stageSpan) endAt(t time.Time) {
	if t.IsZero() {
		s.span.End()
		return
	}
	s.span.End(trace.WithTimestamp(t))
}

// fail marks the span with a refusal or failure.
func (s stageSpan) fail(err error) {
	if err == nil {
		return
	}
	var d *Denial
	if errors.As(err, &d) {
		s.span.SetAttributes(DenialAttributes(d)...)
	}
	s.span.SetStatus(codes.Error, err.Error())
}

// eventAttributes are the attributes of what an event records.
func eventAttributes(ev *event.Event) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrActor.String(ev.Actor), AttrEventKind.String(string(ev.Kind)), AttrEventID.String(ev.ID)}
	if a := ev.Action; a != nil {
		attrs = append(attrs, AttrActionType.String(string(a.Type)), AttrActionTarget.String(a.Target))
		if a.Envelope != "" {
			attrs = append(attrs, AttrEnvelope.String(a.Envelope))
		}
	}
	if ev.Session != "" {
		attrs = append(attrs, AttrSession.String(ev.Session))
	}
	return attrs
}

// DenialAttributes are the span attributes of a refusal: the stage and
// gate that refused, and the policy whose rule it was.
func DenialAttributes(d *Denial) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrOutcome.String(OutcomeDenied), AttrDenialStage.String(d.Stage)}
	if d.Gate != "" {
		attrs = append(attrs, AttrDenialGate.String(d.Gate))
	}
	if d.Policy != "" {
		attrs = append(attrs, AttrDenialPolicy.String(d.Policy))
	}
	return attrs
}
