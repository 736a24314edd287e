package servicestest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"
)

// Jaeger is the Jaeger all-in-one .ci/services starts on 127.0.0.1 (spans
// in memory), a real OTLP receiver: OTLPEndpoint is its OTLP/HTTP base
// URL, Query its query API.
type Jaeger struct {
	OTLPEndpoint, Query string
}

// NewJaeger returns the Jaeger that ANNAL_TEST_OTLP_ENDPOINT and
// ANNAL_TEST_JAEGER_QUERY name; without them the test skips, or fails
// under ANNAL_REQUIRE_SERVICES.
func NewJaeger(t testing.TB) Jaeger {
	t.Helper()
	j := Jaeger{OTLPEndpoint: os.Getenv("ANNAL_TEST_OTLP_ENDPOINT"), Query: os.Getenv("ANNAL_TEST_JAEGER_QUERY")}
	if j.OTLPEndpoint == "" || j.Query == "" {
		const why = "ANNAL_TEST_OTLP_ENDPOINT and ANNAL_TEST_JAEGER_QUERY are not set: .ci/test starts Jaeger (.ci/services install-jaeger, start-jaeger)"
		if os.Getenv("ANNAL_REQUIRE_SERVICES") != "" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return j
}

// JaegerTrace is a trace as Jaeger's query API answers it
// (GET /api/traces/{id}): its spans and the processes that sent them.
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"`
}

// JaegerSpan is one span of a JaegerTrace.
type JaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags      []JaegerTag `json:"tags"`
	ProcessID string      `json:"processID"`
}

// JaegerProcess is the service that sent spans.
type JaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []JaegerTag `json:"tags"`
}

// JaegerTag is a span's or process's attribute.
type JaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Parent is the span id a span is the child of ("" for a root span).
func (s JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag is the value of a span's tag, written as text, and whether it has it.
func (s JaegerSpan) Tag(key string) (string, bool) {
	for _, tag := range s.Tags {
		if tag.Key == key {
			return fmt.Sprint(tag.Value), true
		}
	}
	return "", false
}

// Trace asks Jaeger's query API for a trace until done says it is whole
// (spans arrive in batches) or timeout passes; it returns the last answer,
// nil if Jaeger never had the trace.
func (j Jaeger) Trace(t testing.TB, traceID string, timeout time.Duration, done func(*JaegerTrace) bool) *JaegerTrace {
	t.Helper()
	var last *JaegerTrace
	for deadline := time.Now().Add(timeout); ; {
		tr, err := j.fetchTrace(traceID)
		if err != nil {
			t.Fatal(err)
		}
		if tr != nil {
			last = tr
			if done(tr) {
				return tr
			}
		}
		if time.Now().After(deadline) {
			return last
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fetchTrace reads one trace: nil while Jaeger has none of it.
func (j Jaeger) fetchTrace(traceID string) (*JaegerTrace, error) {
	resp, err := http.Get(j.Query + "/api/traces/" + traceID)
	if err != nil {
		return nil, fmt.Errorf("Jaeger query API: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("Jaeger query API: GET /api/traces/%s: %s: %s", traceID, resp.Status, body)
	}
	var out struct {
		Data []JaegerTrace `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("Jaeger query API: %v", err)
	}
	if len(out.Data) == 0 {
		return nil, nil
	}
	return &out.Data[0], nil
}
