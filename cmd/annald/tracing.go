package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/annal-dev/annal/internal/cli"
	"github.com/annal-dev/annal/internal/otlp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// traceFlushTimeout bounds how long a stopping annald sends the spans it
// still holds.
const traceFlushTimeout = 5 * time.Second

// tracing is the tracer --otlp-endpoint asks for (nil when it is empty:
// nothing is traced) and how to stop it, sending what is batched.
func (f serveFlags) tracing(ctx context.Context, logger *slog.Logger) (trace.Tracer, func(), error) {
	if f.otlpEndpoint == "" {
		return nil, func() {}, nil
	}
	tp, err := otlp.NewProvider(ctx, otlp.Config{Endpoint: f.otlpEndpoint, SampleRatio: f.traceSample, ServiceVersion: cli.Version()})
	if err != nil {
		return nil, nil, fmt.Errorf("--otlp-endpoint: %w", err)
	}
	// The SDK reports a failed export through the global handler: into
	// annald's log, not its own stderr lines.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("trace export failed", "err", err) }))
	logger.Info("tracing requests", "otlp_endpoint", f.otlpEndpoint, "sample", f.traceSample)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			logger.Warn("sending the last traces failed", "err", err)
		}
	}
	return tp.Tracer("github.com/annal-dev/annal"), stop, nil
}
