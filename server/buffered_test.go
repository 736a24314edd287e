package server

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/fastpost"
)

// bufferedPatterns are the mux's routes whose handlers answer whole and
// small: the only ones a request Buffered takes may reach.
var bufferedPatterns = map[string]bool{
	"POST /v1/actions": true, "GET /v1/info": true, "GET /checkpoint": true, "GET /v1/healthz": true, "GET /v1/readyz": true,
	"GET /v1/proof/consistency": true, "GET /v1/proof/{index}": true, "GET /v1/events/{index}": true,
	"GET /v1/whoami": true, "GET /v1/holds/{id}": true,
}

// Buffered takes the small whole answers' routes, and no request that
// the mux routes elsewhere: not the stream, the history pages, the bundle,
// tiles, blobs, nor a path that is escaped, unclean or a prefix away from
// one it takes. Besides a table, random targets made of the routes'
// pieces are each routed by the server's own mux: every one Buffered
// takes must reach one of bufferedPatterns.
func TestBufferedRoutes(t *testing.T) {
	s := New(newTestServer(t).k, discardLogger())
	for _, tc := range []struct {
		method, target string
		want           bool
	}{
		{"POST", "/v1/actions", true},
		{"POST", "/v1/actions?wait=published", true},
		{"GET", "/v1/info", true},
		{"GET", "/v1/info?x=1", true},
		{"GET", "/checkpoint", true},
		{"GET", "/v1/healthz", true},
		{"GET", "/v1/readyz", true},
		{"GET", "/v1/proof/12", true},
		{"GET", "/v1/proof/consistency?old=1&new=2", true},
		{"GET", "/v1/events/0", true},
		{"GET", "/v1/whoami", true},
		{"GET", "/v1/holds/hold-0123456789abcdef", true},
		{"GET", "/v1/holds", false},
		{"GET", "/v1/holds/", false},
		{"GET", "/v1/holds/hold-1/approve", false},
		{"GET", "/v1/holds/..", false},
		{"GET", "/v1/holds/Hold%2D1", false},
		{"POST", "/v1/holds/hold-1", false},
		{"GET", "/v1/events", false},
		{"GET", "/v1/events?limit=10", false},
		{"GET", "/v1/events/stream", false},
		{"GET", "/v1/events/12/", false},
		{"GET", "/v1/events/1a", false},
		{"GET", "/v1/events/", false},
		{"GET", "/v1/proof/", false},
		{"GET", "/v1//info", false},
		{"GET", "/v1/./info", false},
		{"GET", "/v1/%69nfo", false},
		{"GET", "/v1/info/", false},
		{"GET", "/v1/bundle", false},
		{"GET", "/tile/0/000", false},
		{"GET", "/metrics", false},
		{"GET", "/v1/blobs/x", false},
		{"GET", "/v1/actions", false},
		{"HEAD", "/v1/info", false},
		{"POST", "/v1/agents", false},
		{"POST", "/v1/info", false},
		{"POST", "/v1/actions/", false},
		{"PUT", "/v1/actions", false},
	} {
		u, err := url.ParseRequestURI(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := Buffered(tc.method, u); got != tc.want {
			t.Errorf("Buffered(%s %s) = %v, want %v", tc.method, tc.target, got, tc.want)
		}
	}
	pieces := []string{"v1", "actions", "info", "checkpoint", "healthz", "readyz", "proof", "consistency", "events", "stream",
		"bundle", "tile", "blobs", "agents", "whoami", "holds", "hold-1", "approve", "actors", "12", "0", "", ".", "..", "%2F", "%69nfo", "a"}
	rng := rand.New(rand.NewPCG(7, 8))
	taken := 0
	for range 20000 {
		n := 1 + rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = pieces[rng.IntN(len(pieces))]
		}
		if rng.IntN(2) == 0 {
			parts[0] = "v1" // most routes' first piece
		}
		target := "/" + strings.Join(parts, "/")
		method := []string{"GET", "POST", "HEAD"}[rng.IntN(3)]
		u, err := url.ParseRequestURI(target)
		if err != nil || !Buffered(method, u) {
			continue
		}
		taken++
		r, err := http.NewRequest(method, "http://h"+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, pattern := s.mux.Handler(r); !bufferedPatterns[pattern] {
			t.Fatalf("Buffered takes %s %s, which the mux routes to %q", method, target, pattern)
		}
	}
	if taken < 100 {
		t.Fatalf("only %d random targets taken: the check checked little", taken)
	}
}

// An agent that reads between its actions (the log's state, its
// receipt's proof and entry, a published receipt, itself, a hold, even
// one not there) on its client's kept
// connection stays on annald's fast path: with fastpost's Buffered set to
// Buffered, as annald sets it, net/http is handed no connection at all.
// The event stream, which Buffered does not take, is handed its own.
func TestBufferedRoutesKeepTheFastPath(t *testing.T) {
	ts := newTestServer(t)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handler := New(ts.k, discardLogger())
	fl, err := fastpost.New(inner, fastpost.Config{Path: "/v1/actions", Handler: handler, MaxBody: api.MaxActionBody, Buffered: Buffered})
	if err != nil {
		t.Fatal(err)
	}
	var handed atomic.Int64
	hs := &http.Server{Handler: handler, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			handed.Add(1)
		}
	}}
	go hs.Serve(fl)
	t.Cleanup(func() { hs.Close(); fl.Close() })
	c, err := client.New("http://"+inner.Addr().String(), ts.rootCred)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := c.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/a", Payload: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.Info(ctx); err != nil {
			t.Fatal(err)
		}
		rc, err := c.SubmitAndWait(ctx, api.ActionRequest{Type: "observe", Target: "workspace/a"})
		if err != nil || rc.Proof == "" || rc.ProofError != "" {
			t.Fatalf("published receipt %d: %+v, %v", i, rc, err)
		}
		if _, err := c.Proof(ctx, first.Index); err != nil {
			t.Fatal(err)
		}
		entry, err := c.Event(ctx, first.Index)
		if err != nil || !strings.Contains(string(entry), `"workspace/a"`) {
			t.Fatalf("entry %d: %s, %v", first.Index, entry, err)
		}
		if _, err := c.Consistency(ctx, 1, rc.Index+1); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		if me, err := c.WhoAmI(ctx); err != nil || me.Kind != "human" {
			t.Fatalf("whoami: %+v, %v", me, err)
		}
		var apiErr *client.Error
		if _, err := c.Hold(ctx, "hold-0123456789abcdef"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
			t.Fatalf("a hold that is not there: %v", err)
		}
		if _, err := c.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/a", Payload: []byte(`{"n":2}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := handed.Load(); n != 0 {
		t.Fatalf("%d connections handed to net/http: the reads between actions left the fast path", n)
	}
	// A history page is not taken: its connection goes to net/http.
	if _, err := c.History(ctx, url.Values{"limit": {"1"}}); err != nil {
		t.Fatal(err)
	}
	if n := handed.Load(); n != 1 {
		t.Fatalf("after a history page, %d connections handed to net/http, want 1", n)
	}
}
