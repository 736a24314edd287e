// Package otlp builds the OpenTelemetry tracer provider that annald exports
// its traces with: OTLP over HTTP (protobuf) to a collector or a tracing
// backend (Jaeger, Tempo, an OpenTelemetry Collector), in batches, sampled
// by the caller's choice where a request continues a trace and by a ratio
// where it begins one.
//
// The endpoint is a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: traces go
// to its path /v1/traces. The SDK reads the other standard variables
// itself: OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE
// (and their TRACES_ forms), OTEL_BSP_* for batching, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES for the resource (service.name is "annald"
// unless they say otherwise). It sets no global: the provider is passed to
// whoever traces.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// TracesPath is the OTLP/HTTP path of traces, below the endpoint.
const TracesPath = "/v1/traces"

// Config says where traces go and which are kept.
type Config struct {
	// Endpoint is the OTLP/HTTP base URL, http:// or https://, e.g.
	// "http://127.0.0.1:4318".
	Endpoint string
	// SampleRatio is the share of new traces kept, 0 to 1. A request that
	// continues a caller's trace follows the caller's sampled flag.
	SampleRatio float64
	// ServiceVersion is the resource's service.version.
	ServiceVersion string
}

// TracesURL is where an endpoint's traces go: its path /v1/traces. It
// refuses what is not an http(s) URL with a host, or carries a query or
// fragment.
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("OTLP endpoint %q: %v", endpoint, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("OTLP endpoint %q is not an http:// or https:// URL of a host (e.g. http://127.0.0.1:4318)", endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + TracesPath
	u.RawPath = ""
	return u.String(), nil
}

// NewProvider returns a tracer provider exporting to cfg.Endpoint. Its
// Shutdown sends what is still batched.
func NewProvider(ctx context.Context, cfg Config) (*sdktrace.TracerProvider, error) {
	if !(cfg.SampleRatio >= 0 && cfg.SampleRatio <= 1) {
		return nil, fmt.Errorf("trace sample ratio %v is not between 0 and 1", cfg.SampleRatio)
	}
	tracesURL, err := TracesURL(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(tracesURL))
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	// The environment's resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES)
	// comes after, so it wins over annald's defaults.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName("annald"), semconv.ServiceVersion(cfg.ServiceVersion)),
		resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	), nil
}
