package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/annal-dev/annal/kernel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Traces of requests (the kernel's side is kernel/tracing.go). A request
// that carries a W3C traceparent header continues the caller's trace: its
// trace id reaches the kernel, which records it in the event the request
// leads to and in the receipt, whether or not the server traces. With a
// tracer (Trace), every request is a server span, the child of the
// caller's span if it sent one, else the root of a new trace, and the
// kernel's stages are its children. Without one, and without a
// traceparent, a request costs one header lookup more.

// traceparentHeader is the W3C Trace Context header in Go's canonical
// form, looked up directly in the header map.
const traceparentHeader = "Traceparent"

// Trace has the server trace every request it serves as a span of
// tracer's. The kernel's stages are traced under it when the kernel has a
// tracer too (kernel.Config.Tracer).
func (s *Server) Trace(tracer trace.Tracer) { s.tracer = tracer }

// serveTraced serves a request in its trace: the caller's, from its
// traceparent header, and, with a tracer, the request's own span.
func (s *Server) serveTraced(w http.ResponseWriter, r *http.Request) {
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if s.tracer == nil {
		s.serve(w, r.WithContext(ctx))
		return
	}
	ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path)))
	defer span.End()
	tw := &tracedWriter{ResponseWriter: w, status: http.StatusOK}
	routed := s.serve(tw, r.WithContext(ctx))
	if routed != nil && routed.Pattern != "" {
		// The route, not the path, names the span (OpenTelemetry's HTTP
		// conventions): "POST /v1/actions", "GET /v1/events/{index}".
		span.SetName(routed.Pattern)
		_, route, _ := strings.Cut(routed.Pattern, " ")
		span.SetAttributes(semconv.HTTPRouteKey.String(route))
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(tw.status))
	if tw.status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(tw.status))
	}
}

// annotate puts attributes on the request's span, if it is traced.
func (s *Server) annotate(r *http.Request, attrs ...attribute.KeyValue) {
	if s.tracer == nil {
		return
	}
	trace.SpanFromContext(r.Context()).SetAttributes(attrs...)
}

// annotateSubmit puts what became of a submitted action on the request's
// span: committed or held and where, or the stage and gate that denied it.
func (s *Server) annotateSubmit(r *http.Request, rc *kernel.Receipt, err error) {
	if s.tracer == nil {
		return
	}
	span := trace.SpanFromContext(r.Context())
	if err != nil {
		var d *kernel.Denial
		if errors.As(err, &d) {
			span.SetAttributes(kernel.DenialAttributes(d)...)
		}
		return
	}
	span.SetAttributes(kernel.AttrOutcome.String(rc.Status), kernel.AttrLogIndex.Int64(int64(rc.Index)),
		kernel.AttrEventID.String(rc.EventID), kernel.AttrActionType.String(string(rc.Type)), kernel.AttrActionTarget.String(rc.Target))
}

// tracedWriter records the status a handler answers with. It flushes
// through, so that the event stream stays a stream when traced.
type tracedWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *tracedWriter) WriteHeader(status int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *tracedWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Flush flushes the answer when the connection can (net/http's can).
func (w *tracedWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap gives http.ResponseController the connection's writer.
func (w *tracedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
