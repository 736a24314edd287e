package otlp

import (
	"context"
	"net/url"
	"strings"
	"testing"
)

func TestTracesURL(t *testing.T) {
	for _, tc := range []struct{ endpoint, want string }{
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"},
		{"http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"},
		{"https://collector.example:443/otlp", "https://collector.example:443/otlp/v1/traces"},
		{"127.0.0.1:4318", ""},        // no scheme
		{"grpc://127.0.0.1:4317", ""}, // OTLP/gRPC is not spoken
		{"http://", ""},
		{"http://127.0.0.1:4318?x=1", ""},
		{"http://user:pw@127.0.0.1:4318", ""}, // credentials go in OTEL_EXPORTER_OTLP_HEADERS
		{"", ""},
	} {
		got, err := TracesURL(tc.endpoint)
		if tc.want == "" {
			if err == nil {
				t.Errorf("TracesURL(%q) = %q, want an error", tc.endpoint, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("TracesURL(%q) = %q, %v; want %q", tc.endpoint, got, err, tc.want)
		}
	}
}

func TestNewProvider_RefusesBadRatio(t *testing.T) {
	for _, r := range []float64{-0.1, 1.5} {
		if _, err := NewProvider(context.Background(), Config{Endpoint: "http://127.0.0.1:4318", SampleRatio: r}); err == nil {
			t.Errorf("ratio %v accepted", r)
		}
	}
}

// FuzzTracesURL: an endpoint is accepted only as an http(s) URL of a host,
// and its traces URL ends in /v1/traces.
func FuzzTracesURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:4318", "https://h/p/", "ftp://h", "http://[::1]:4318", "http://h/%2F", "http://h#f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, endpoint string) {
		got, err := TracesURL(endpoint)
		if err != nil {
			return
		}
		u, err := url.Parse(got)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.HasSuffix(u.Path, TracesPath) {
			t.Fatalf("TracesURL(%q) = %q", endpoint, got)
		}
	})
}
