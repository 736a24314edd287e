package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"go.opentelemetry.io/otel/trace"
)

// seenRequest is what a server read of a request's head.
type seenRequest struct {
	Method, RequestURI, Host string
	Header                   http.Header
}

// recordingServer answers every request with answer (for its path, or
// "" for any) and records what it read; it counts its connections.
func recordingServer(t *testing.T, answer func(r *http.Request) string) (string, func() []seenRequest, *atomic.Int64) {
	t.Helper()
	var mu sync.Mutex
	var seen []seenRequest
	var conns atomic.Int64
	u := rawServer(t, func(nc net.Conn, i int, req *http.Request) bool {
		if i == 0 {
			conns.Add(1)
		}
		mu.Lock()
		seen = append(seen, seenRequest{req.Method, req.RequestURI, req.Host, req.Header})
		mu.Unlock()
		_, err := io.WriteString(nc, answer(req))
		return err == nil
	})
	return u, func() []seenRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]seenRequest(nil), seen...)
	}, &conns
}

// okJSON answers 200 with body as JSON, as annald frames an answer.
func okJSON(body string) string {
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sat, 28 Nov 2026 12:00:00 GMT\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// noHTTPClient makes c fail the test for any request that goes through
// its http.Client: what it sends must be framed by the client itself.
func noHTTPClient(t *testing.T, c *Client) {
	t.Helper()
	c.http = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("%s %s went through http.Client", r.Method, r.URL)
		return nil, errors.New("not plain")
	})}
}

// The requests a default client frames itself are the ones net/http's
// Request.Write would have written for it: the same request line, Host,
// header fields and body.
func TestPlainRequest_FramedAsNetHTTPFramesIt(t *testing.T) {
	u, seen, _ := recordingServer(t, func(*http.Request) string {
		return okJSON(`{"status":"committed","index":7}`)
	})
	plain, err := New(u+"/prefix/", "cred-1")
	if err != nil {
		t.Fatal(err)
	}
	if plain.plain == nil {
		t.Fatal("a default client of a plain-HTTP kernel has no plain route")
	}
	noHTTPClient(t, plain)
	viaNetHTTP, _ := New(u+"/prefix/", "cred-1")
	viaNetHTTP.plain = nil // the client as it was: http.Client, Request.Write
	ctx := context.Background()
	calls := []func(c *Client) error{
		func(c *Client) error {
			_, err := c.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/a b", Payload: []byte(`{"x":1}`)})
			return err
		},
		func(c *Client) error { _, err := c.Info(ctx); return err },
		func(c *Client) error { _, err := c.Actor(ctx, "a/b c?d"); return err },
		func(c *Client) error {
			_, err := c.doRaw(ctx, http.MethodGet, "v1/events?after=3&kind=a%2Fb", nil)
			return err
		},
		func(c *Client) error { _, err := c.doRaw(ctx, http.MethodPost, "v1/agents/x/resume", nil); return err },
		func(c *Client) error {
			_, err := c.doRaw(ctx, http.MethodPut, "v1/policies/p?default=true", nil)
			return err
		},
		func(c *Client) error { _, err := c.doRaw(ctx, http.MethodDelete, "v1/holds/h1", nil); return err },
	}
	for i, call := range calls {
		if err := call(plain); err != nil {
			t.Fatalf("call %d, plain: %v", i, err)
		}
		if err := call(viaNetHTTP); err != nil {
			t.Fatalf("call %d, through net/http: %v", i, err)
		}
	}
	got := seen()
	if len(got) != 2*len(calls) {
		t.Fatalf("the server read %d requests, want %d", len(got), 2*len(calls))
	}
	for i := 0; i < len(got); i += 2 {
		if !reflect.DeepEqual(got[i], got[i+1]) {
			t.Errorf("call %d:\n plain       %+v\n net/http    %+v", i/2, got[i], got[i+1])
		}
	}
	if got[0].Method != http.MethodPost || got[0].RequestURI != "/prefix/v1/actions" || got[0].Header.Get("Authorization") != "Bearer cred-1" {
		t.Errorf("the first request is not the action: %+v", got[0])
	}
}

// A client that cannot frame a request itself leaves it to http.Client:
// a request with a span to propagate, a signed one, one to another host,
// and every request of a client whose http.Client the caller set.
func TestPlainRequest_LeavesToNetHTTPWhatNeedsIt(t *testing.T) {
	u, seen, _ := recordingServer(t, func(*http.Request) string { return okJSON(`{}`) })
	ctx := context.Background()
	var viaHTTP atomic.Int64
	counting := func(c *Client) {
		c.http = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			viaHTTP.Add(1)
			return sharedTransport.RoundTrip(r)
		})}
	}

	c, _ := New(u, "cred")
	counting(c)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	if _, err := c.Info(trace.ContextWithSpanContext(ctx, sc)); err != nil {
		t.Fatal(err)
	}
	if n := viaHTTP.Load(); n != 1 {
		t.Fatalf("a request with a span went through http.Client %d times, want 1", n)
	}
	if tp := seen()[0].Header.Get("Traceparent"); !strings.HasPrefix(tp, "00-01000000") {
		t.Fatalf("traceparent %q", tp)
	}
	if _, err := c.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if n := viaHTTP.Load(); n != 1 {
		t.Fatal("a request without a span went through http.Client")
	}

	other, _ := New(u, "cred")
	counting(other)
	if _, err := other.doRaw(ctx, http.MethodGet, "http://localhost:1/v1/info", nil); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	if n := viaHTTP.Load(); n != 2 {
		t.Fatal("a request to another host did not go through http.Client")
	}

	set, _ := New(u, "cred")
	set = set.WithHTTPClient(&http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		viaHTTP.Add(1)
		return sharedTransport.RoundTrip(r)
	})})
	if _, err := set.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if n := viaHTTP.Load(); n != 3 {
		t.Fatal("WithHTTPClient's client was not used")
	}

	for _, bad := range []string{"https://example.com", "http://user:pw@127.0.0.1:1", "http://[fe80::1%25eth0]:80"} {
		c, err := New(bad, "cred")
		if err == nil && c.plain != nil {
			t.Errorf("%s has a plain route", bad)
		}
	}
	if c, _ := New(u, "cred\r\nX-Evil: 1"); c.plain != nil {
		t.Error("a credential with CRLF has a plain route")
	}
}

// A redirect is followed as http.Client follows it.
func TestPlainRequest_FollowsRedirects(t *testing.T) {
	u, seen, _ := recordingServer(t, func(r *http.Request) string {
		if r.URL.Path == "/v1/info" {
			return "HTTP/1.1 307 Temporary Redirect\r\nLocation: /v2/info\r\nContent-Length: 0\r\n\r\n"
		}
		return okJSON(`{"origin":"moved"}`)
	})
	c, _ := New(u, "")
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Origin != "moved" {
		t.Fatalf("origin %q", info.Origin)
	}
	if got := seen(); len(got) != 3 || got[2].RequestURI != "/v2/info" {
		t.Fatalf("requests %+v", got)
	}
}

// Sequential requests share one connection, whatever their answers.
func TestPlainRequest_KeepsOneConnection(t *testing.T) {
	u, _, conns := recordingServer(t, func(r *http.Request) string {
		if r.Method == http.MethodDelete {
			return "HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"error\":\"taken\"}"
		}
		return okJSON(`{"status":"committed"}`)
	})
	c, _ := New(u, "cred")
	noHTTPClient(t, c)
	ctx := context.Background()
	for i := range 100 {
		_, err := c.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace/x"})
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		if i%10 == 0 {
			if _, err := c.doRaw(ctx, http.MethodDelete, "v1/holds/h", nil); !IsStatus(err, http.StatusConflict) {
				t.Fatalf("delete: %v", err)
			}
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 110 sequential requests, want 1", n)
	}
}

// An action on a kept connection that died under it is not sent again
// (the kernel may have logged it); a read is.
func TestPlainRequest_SendsAgainOnlyWhatNetHTTPWould(t *testing.T) {
	u, seen := flakyServer(t)
	c, _ := New(u, "cred")
	noHTTPClient(t, c)
	ctx := context.Background()
	if _, err := c.doRaw(ctx, http.MethodGet, "v1/info", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.doRaw(ctx, http.MethodGet, "v1/info", nil); err != nil {
		t.Fatalf("a GET on a connection that died under it: %v", err)
	}
	if n := seenCount(seen, http.MethodGet); n != 3 {
		t.Fatalf("the server read %d GETs, want 3 (the second sent twice)", n)
	}
	var ue *url.Error
	_, err := c.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace/x"})
	if err == nil {
		t.Fatal("an action on a connection that died under it succeeded")
	}
	if !errors.As(err, &ue) {
		t.Fatalf("the error is not a *url.Error as http.Client gives: %T %v", err, err)
	}
	if n := seenCount(seen, http.MethodPost); n != 1 {
		t.Fatalf("the server read %d POSTs, want 1", n)
	}
}

// The context's end, its deadline or its cancellation, ends a request
// that has no answer, and the client's own timeout ends one whose body
// stalls.
func TestPlainRequest_TheContextEndsIt(t *testing.T) {
	u := rawServer(t, func(nc net.Conn, _ int, req *http.Request) bool {
		if req.URL.Path == "/v1/info" {
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{")
		}
		time.Sleep(3 * time.Second)
		return false
	})
	c, _ := New(u, "cred")
	noHTTPClient(t, c)
	submit := func(ctx context.Context) error {
		_, err := c.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace/x"})
		return err
	}
	start := time.Now()
	timed, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := submit(timed); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the context's deadline: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := submit(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("the context cancelled: %v", err)
	}
	c.timeout = 100 * time.Millisecond
	if _, err := c.Info(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a body that stalls past the client's timeout: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the three requests ended after %v", d)
	}
}

// plainAnswer reads a head that comes in pieces, and leaves to
// ReadResponse what is outside its subset, consuming none of it.
func TestPlainAnswer(t *testing.T) {
	read := func(t *testing.T, answer string, pieces int) (*http.Response, bool, []byte) {
		t.Helper()
		pr, pw := io.Pipe()
		go func() {
			step := max(1, len(answer)/pieces)
			for i := 0; i < len(answer); i += step {
				pw.Write([]byte(answer[i:min(len(answer), i+step)]))
			}
			pw.Close()
		}()
		br := bufio.NewReaderSize(pr, 4096)
		resp, ok, err := plainAnswer(br, http.MethodGet)
		if err != nil {
			t.Fatal(err)
		}
		var rest []byte
		if ok {
			rest, _ = io.ReadAll(resp.Body)
		} else {
			rest, _ = io.ReadAll(br)
		}
		return resp, ok, rest
	}
	t.Run("in pieces", func(t *testing.T) {
		answer := okJSON(`{"a":1}`)
		for _, pieces := range []int{1, 3, len(answer)} {
			resp, ok, body := read(t, answer, pieces)
			if !ok || resp.StatusCode != 200 || string(body) != `{"a":1}` || resp.Header.Get("Content-Type") != "application/json" || resp.ContentLength != 7 {
				t.Fatalf("%d pieces: ok %v, %+v, body %q", pieces, ok, resp, body)
			}
		}
	})
	for name, answer := range map[string]string{
		"bare LF":             "HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"chunked":             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"close":               "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"no length":           "HTTP/1.1 200 OK\r\n\r\nok",
		"two lengths":         "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0":            "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"informational first": "HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"no content":          "HTTP/1.1 204 No Content\r\n\r\n",
		"folded field":        "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 2\r\n\r\nok",
		"space before colon":  "HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 2\r\n\r\nok",
		"control in a value":  "HTTP/1.1 200 OK\r\nX-A: 1\x01\r\nContent-Length: 2\r\n\r\nok",
		"longer than 4 KiB":   "HTTP/1.1 200 OK\r\nX-A: " + strings.Repeat("a", 5000) + "\r\nContent-Length: 2\r\n\r\nok",
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok, rest := read(t, answer, 2); ok || !bytes.Equal(rest, []byte(answer)) {
				t.Fatalf("read as plain %v; left %d of %d bytes for ReadResponse", ok, len(rest), len(answer))
			}
		})
	}
	t.Run("cut short", func(t *testing.T) {
		_, _, err := plainAnswer(bufio.NewReader(strings.NewReader("")), http.MethodGet)
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("no answer: %v, want io.ErrUnexpectedEOF as ReadResponse", err)
		}
		resp, ok, _ := plainAnswer(bufio.NewReader(strings.NewReader("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok")), http.MethodGet)
		if !ok {
			t.Fatal("not plain")
		}
		if _, err := io.ReadAll(resp.Body); err != io.ErrUnexpectedEOF {
			t.Fatalf("a body cut short: %v, want io.ErrUnexpectedEOF", err)
		}
	})
}
