package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/blobstore"
	"github.com/annal-dev/annal/client"
)

// bufferedPatterns are the routes answered whole, as reviewed: the
// only ones a request Buffered takes may reach, with the longest body
// each reads. A route marked whole in the table must be added here too.
var bufferedPatterns = map[string]int64{
	"POST /v1/actions": api.MaxActionBody, "POST /v1/agents": api.MaxAgentBody,
	"GET /v1/info": 0, "GET /checkpoint": 0, "GET /v1/healthz": 0, "GET /v1/readyz": 0,
	"GET /v1/proof/consistency": 0, "GET /v1/proof/{index}": 0, "GET /v1/events/{index}": 0,
	"GET /v1/whoami": 0, "GET /v1/holds/{id}": 0,
	"POST /v1/holds/{id}/{decision}":    api.MaxSmallBody,
	"POST /v1/actors/{id}/status":       api.MaxSmallBody,
	"POST /v1/actors/{id}/key":          api.MaxSmallBody,
	"POST /v1/subjects/{subject}/erase": api.MaxSmallBody,
	"POST /v1/envelopes":                api.MaxEnvelopeBody,
	"POST /v1/envelopes/{id}/revoke":    api.MaxSmallBody,
	"POST /v1/agents/{id}/ring":         api.MaxSmallBody,
	"POST /v1/elevations":               api.MaxSmallBody,
	"POST /v1/elevations/{id}/revoke":   api.MaxSmallBody,
	"POST /v1/sessions":                 api.MaxControlBody,
	"POST /v1/sessions/{id}/changes":    api.MaxSmallBody,
	"POST /v1/sessions/{id}/deltas":     api.MaxControlBody,
	"POST /v1/agents/{id}/kill":         api.MaxSmallBody,
	"POST /v1/agents/{id}/quarantine":   api.MaxSmallBody,
	"POST /v1/agents/{id}/release":      api.MaxSmallBody,
	"POST /v1/agents/{id}/signal":       api.MaxSmallBody,
	"POST /v1/sagas":                    api.MaxControlBody,
	"POST /v1/sagas/{id}/steps/{step}":  api.MaxSmallBody,
	"POST /v1/policies/{name}/attach":   api.MaxSmallBody,
	"PUT /v1/vfs/{agent}/{path...}":     api.MaxVFSContent,
	"GET /v1/vfs/{agent}/{path...}":     0,
	"GET /v1/vfs/{agent}":               0,
}

// Buffered takes the routes answered whole, and no request that the mux
// routes elsewhere: not the stream, the history pages, the bundle, tiles,
// blobs, lists, nor a path the mux redirects or refuses. Besides a table,
// random targets made of the routes' pieces are each routed by the
// server's own mux, which must agree with Buffered's copy of the patterns:
// every one Buffered takes must reach one of bufferedPatterns, and
// Buffered must name that route's limit.
func TestBufferedRoutes(t *testing.T) {
	if got := theRouting().whole; !maps.Equal(got, bufferedPatterns) {
		t.Fatalf("routes answered whole %v, reviewed %v", got, bufferedPatterns)
	}
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
		{"GET", "/v1/holds/Hold%2D1", true}, // the mux matches it, escaped, to the hold's route
		{"GET", "/v1/%69nfo", true},         // and this to the log's state
		{"POST", "/v1/holds/hold-1/approve", true},
		{"POST", "/v1/agents", true},
		{"POST", "/v1/sessions/s1/deltas", true},
		{"POST", "/v1/sagas/sg/steps/one", true},
		{"PUT", "/v1/vfs/agent-1/mem/working/notes.md", true},
		{"GET", "/v1/vfs/agent-1/mem/working/notes.md", true},
		{"GET", "/v1/vfs/agent-1", true},
		{"GET", "/v1/holds", false},
		{"GET", "/v1/holds/", false},
		{"GET", "/v1/holds/hold-1/approve", false},
		{"GET", "/v1/holds/..", false},
		{"POST", "/v1/holds/hold-1", false},
		{"GET", "/v1/events", false},
		{"GET", "/v1/events?limit=10", false},
		{"GET", "/v1/events/stream", false},
		{"GET", "/v1/events/12/", false},
		{"GET", "/v1/events/", false},
		{"GET", "/v1/proof/", false},
		{"GET", "/v1//info", false},
		{"GET", "/v1/./info", false},
		{"GET", "/v1/info/", false},
		{"GET", "/v1/bundle", false},
		{"GET", "/tile/0/000", false},
		{"GET", "/tile", false}, // redirected to /tile/
		{"GET", "/metrics", false},
		{"GET", "/v1/blobs/x", false},
		{"POST", "/v1/blobs", false},
		{"GET", "/v1/actions", false},
		{"GET", "/v1/actors", false},
		{"GET", "/v1/sessions/s1", false},
		{"POST", "/v1/actions/may-ever", false},
		{"HEAD", "/v1/info", false},
		{"POST", "/v1/info", false},
		{"POST", "/v1/actions/", false},
		{"PUT", "/v1/actions", false},
		{"DELETE", "/ui/session", false},
		{"GET", "/v1/vfs", false},
		{"PUT", "/v1/policies/p", false},
		{"POST", "/ui/session", false},
	} {
		u, err := url.ParseRequestURI(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := Buffered(tc.method, u); got != tc.want {
			t.Errorf("Buffered(%s %s) = %v, want %v", tc.method, tc.target, got, tc.want)
		}
	}
	pieces := []string{"v1", "actions", "info", "checkpoint", "healthz", "readyz", "proof", "consistency", "events", "stream",
		"bundle", "tile", "blobs", "agents", "whoami", "holds", "hold-1", "approve", "actors", "status", "sessions", "deltas",
		"sagas", "steps", "kill", "may-ever", "envelopes", "revoke", "vfs", "agent-1", "mem", "12", "0", "", ".", "..", "%2F", "%69nfo", "a"}
	rng := rand.New(rand.NewPCG(7, 8))
	taken := map[string]int{}
	for range 30000 {
		n := 1 + rng.IntN(5)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = pieces[rng.IntN(len(pieces))]
		}
		if rng.IntN(2) == 0 {
			parts[0] = "v1" // most routes' first piece
		}
		target := "/" + strings.Join(parts, "/")
		method := []string{"GET", "POST", "HEAD", "PUT"}[rng.IntN(4)]
		u, err := url.ParseRequestURI(target)
		if err != nil {
			continue
		}
		r, err := http.NewRequest(method, "http://h"+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, pattern := s.mux.Handler(r)
		if _, copied := theRouting().mux.Handler(r); copied != pattern {
			t.Fatalf("%s %s: the server's mux routes to %q, Buffered's copy to %q", method, target, pattern, copied)
		}
		maxBody, ok := Buffered(method, u)
		if !ok {
			continue
		}
		taken[pattern]++
		if want, reviewed := bufferedPatterns[pattern]; !reviewed || maxBody != want {
			t.Fatalf("Buffered takes %s %s (limit %d), which the mux routes to %q", method, target, maxBody, pattern)
		}
	}
	if len(taken) < 15 {
		t.Fatalf("random targets took only %v: the check checked little", taken)
	}
}

// The body limit Buffered names for each POST and PUT route answered
// whole is the handler's own (for an agent's file, with a blob store that
// takes files that long): one byte more is refused with 413, so a front
// that leaves a longer body to net/http leaves it only what the handler
// would refuse.
func TestBufferedLimitsAreTheHandlers(t *testing.T) {
	ts := newVFSWorld(t)
	for pattern, limit := range bufferedPatterns {
		method, path, _ := strings.Cut(pattern, " ")
		if method == http.MethodGet {
			continue
		}
		path = strings.NewReplacer("{id}", "x", "{decision}", "approve", "{subject}", "x", "{step}", "x", "{name}", "x",
			"{agent}", "root", "{path...}", "mem/working/notes.md").Replace(path)
		for _, n := range []int64{limit, limit + 1} {
			body := `{"reason":"` + strings.Repeat("a", int(n)-len(`{"reason":""}`)) + `"}`
			req, err := http.NewRequest(method, ts.srv.URL+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+ts.rootCred)
			resp, err := ts.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if tooLarge := resp.StatusCode == http.StatusRequestEntityTooLarge; tooLarge != (n > limit) {
				t.Errorf("%s with a body of %d bytes (limit %d): %s", pattern, n, limit, resp.Status)
			}
		}
	}
}

// An agent that reads between its actions (the log's state, its
// receipt's proof and entry, a published receipt, itself, a hold, even
// one not there), and makes changes (a sub-agent, a session and its
// state, a file of its memory, read back and listed), on its client's kept
// connection stays on annald's fast path: with fastpost's Buffered set to
// Buffered, as annald sets it, net/http is handed no connection at all.
// The event stream, which Buffered does not take, is handed its own.
func TestBufferedRoutesKeepTheFastPath(t *testing.T) {
	ts := newTestServer(t)
	handler := New(ts.k, discardLogger())
	files, err := blobstore.Open(t.TempDir(), api.MaxVFSContent, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	handler.KeepFiles(files)
	base, handed := bufferedFront(t, handler, Buffered)
	c, err := client.New(base, ts.rootCred)
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
		// Changes an agent makes between its actions: a sub-agent, a
		// session and a step of it.
		if _, err := c.CreateAgent(ctx, api.AgentRequest{Name: fmt.Sprintf("helper-%d", i), Purpose: "read"}); err != nil {
			t.Fatal(err)
		}
		session := fmt.Sprintf("s%d", i)
		if _, err := c.CreateSession(ctx, api.SessionRequest{ID: session}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ChangeSession(ctx, session, api.SessionChangeRequest{Op: "state", State: "HANDSHAKING"}); err != nil {
			t.Fatal(err)
		}
		// Its memory: a file written, read back, and its folder listed.
		note := fmt.Sprintf("vfs://root/mem/semantic/note-%d.md", i)
		if _, err := c.VFSPut(ctx, note, []byte("the build runs on two cores\n"), ""); err != nil {
			t.Fatal(err)
		}
		if data, _, err := c.VFSRead(ctx, note); err != nil || string(data) != "the build runs on two cores\n" {
			t.Fatalf("read back %s: %q, %v", note, data, err)
		}
		if listing, err := c.VFSList(ctx, "vfs://root/mem/semantic/"); err != nil || len(listing.Files) != i+1 {
			t.Fatalf("listing after %d notes: %+v, %v", i+1, listing, err)
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
