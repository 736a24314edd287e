package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

// forwardThrough sends a write to a follower's forwarder whose lease
// holder is at holderURL and returns the answer.
func forwardThrough(t *testing.T, holderURL string, header http.Header) (*http.Response, api.Error, string) {
	t.Helper()
	fw := newForwarder(func(context.Context) (kernel.Leader, error) {
		return kernel.Leader{Holder: "kernel-a", URL: holderURL, ExpiresIn: time.Second}, nil
	}, "kernel-b", 1<<20, slog.New(slog.DiscardHandler))
	follower := httptest.NewServer(fw)
	defer follower.Close()
	req, _ := http.NewRequest("POST", follower.URL+"/v1/actions?x=1", strings.NewReader(`{"type":"mutate"}`))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e api.Error
	json.Unmarshal(raw, &e)
	return resp, e, string(raw)
}

// A follower forwards a write to the lease holder with its credential,
// signature, trace context and content headers unchanged, marked as
// forwarded, and passes the holder's status, headers and body back.
func TestSpec002_StatelessExecution_ForwardPassesTheRequestAndTheAnswer(t *testing.T) {
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		for _, h := range []string{"Authorization", "Annal-Signature", "Traceparent", "Content-Type", "Cookie"} {
			w.Header().Add("Seen", h+"="+r.Header.Get(h))
		}
		w.Header().Set("Seen-Forwarded-By", r.Header.Get(ForwardedHeader))
		w.Header().Set("Seen-Uri", r.Method+" "+r.URL.RequestURI()+" "+string(body))
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"index":7}`))
	}))
	defer holder.Close()
	sent := http.Header{"Authorization": {"Bearer cred"}, "Annal-Signature": {"sig"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"Content-Type": {"application/json"}, "Cookie": {"annal_session=abc"}}
	resp, _, body := forwardThrough(t, holder.URL, sent)
	if resp.StatusCode != http.StatusAccepted || body != `{"index":7}` {
		t.Fatalf("answer: %d %s", resp.StatusCode, body)
	}
	seen := strings.Join(resp.Header.Values("Seen"), "; ")
	for h, v := range sent {
		if !strings.Contains(seen, h+"="+v[0]) {
			t.Errorf("%s not forwarded unchanged: %s", h, seen)
		}
	}
	if got := resp.Header.Get("Seen-Forwarded-By"); got != "kernel-b" {
		t.Errorf("%s: %q", ForwardedHeader, got)
	}
	if got := resp.Header.Get("Seen-Uri"); got != `POST /v1/actions?x=1 {"type":"mutate"}` {
		t.Errorf("the holder got %q", got)
	}
}

// A holder that cannot be reached before the request is sent: 503 with
// Retry-After, retryable (nothing was done).
func TestSpec002_StatelessExecution_UnreachableHolderIsADefiniteRetry(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	resp, e, body := forwardThrough(t, "http://"+addr, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !e.Retryable || e.OutcomeUnknown {
		t.Fatalf("an unreachable holder: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// A connection to the holder that breaks after the request was sent: the
// write may be logged, so the answer is outcome_unknown without
// Retry-After, as the kernel answers a lost commit.
func TestSpec002_StatelessExecution_BrokenForwardIsOutcomeUnknown(t *testing.T) {
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // read, then gone without an answer
		}
	}))
	defer holder.Close()
	resp, e, body := forwardThrough(t, holder.URL, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "" || !e.OutcomeUnknown || e.Retryable {
		t.Fatalf("a broken forward: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// No kernel holds a live lease: 503 with Retry-After.
func TestSpec002_StatelessExecution_NoHolderIsADefiniteRetry(t *testing.T) {
	fw := newForwarder(func(context.Context) (kernel.Leader, error) {
		return kernel.Leader{Holder: "kernel-a", URL: "http://127.0.0.1:1", ExpiresIn: -time.Second}, nil
	}, "kernel-b", 1<<20, slog.New(slog.DiscardHandler))
	rec := httptest.NewRecorder()
	fw.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/actions", strings.NewReader("{}")))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("no live holder: %d %s", rec.Code, rec.Body)
	}
}

// A holder that cannot be reached because another kernel took the lease
// over since the follower read it: the request, never sent, goes to the
// new holder.
func TestSpec002_StatelessExecution_ForwardFollowsATakeover(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	newHolder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	defer newHolder.Close()
	reads := 0
	fw := newForwarder(func(context.Context) (kernel.Leader, error) {
		reads++
		if reads == 1 {
			return kernel.Leader{Holder: "kernel-a", URL: dead, ExpiresIn: time.Second}, nil
		}
		return kernel.Leader{Holder: "kernel-c", URL: newHolder.URL, ExpiresIn: time.Second}, nil
	}, "kernel-b", 1<<20, slog.New(slog.DiscardHandler))
	rec := httptest.NewRecorder()
	fw.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/actions", strings.NewReader("{}")))
	if rec.Code != http.StatusCreated || reads != 2 {
		t.Fatalf("after a takeover: %d (%d reads of the holder) %s", rec.Code, reads, rec.Body)
	}
}
