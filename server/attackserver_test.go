package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
)

// The attack tests talk to the server over HTTP only: requests in, then the
// state through the API and the log through GET /v1/events/<i>. This file
// holds what they share: a server whose kernel configuration a test may
// change, a clock a test may move forward, raw requests and a reader of
// logged events.

// attackClock is the kernel's clock in a test: the real time plus an
// offset the test moves forward, so that an expiry passes without waiting.
type attackClock struct{ offset atomic.Int64 }

func (c *attackClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *attackClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// newAttackServer is newTestServer with a kernel configuration that
// configure may change first (rate limits, clocks), and a root client that
// keeps connections for the concurrent clients of the attacks.
func newAttackServer(t testing.TB, configure func(*kernel.Config)) *testServer {
	t.Helper()
	var ts *testServer
	if configure != nil {
		ts = newTestServer(t, configure)
	} else {
		ts = newTestServer(t)
	}
	ts.root = ts.root.WithHTTPClient(attackHTTP)
	return ts
}

// attackHTTP keeps enough idle connections for the concurrent clients of
// the attack tests.
var attackHTTP = &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// reply is an HTTP answer: its status, its body and, for an error, the
// error body decoded.
type reply struct {
	method, path string
	status       int
	header       http.Header
	body         []byte
	err          api.Error
}

func (r reply) String() string {
	return fmt.Sprintf("%s %s: %d %s", r.method, r.path, r.status, bytes.TrimSpace(r.body))
}

// call sends one request as the actor with credential cred. body is sent
// as is if it is a string, and as JSON otherwise (nil: no body).
func (ts *testServer) call(t testing.TB, method, path, cred string, body any) reply {
	t.Helper()
	r, err := ts.try(method, path, cred, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// try is call for a goroutine other than the test's: it returns what
// went wrong instead of failing the test.
func (ts *testServer) try(method, path, cred string, body any) (reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, ts.srv.URL+path, rd)
	if err != nil {
		return reply{}, err
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, err := attackHTTP.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	r := reply{method: method, path: path, status: resp.StatusCode, header: resp.Header, body: raw}
	if resp.StatusCode >= 300 {
		_ = json.Unmarshal(raw, &r.err)
	}
	return r, nil
}

// must fails the test unless the answer has this status.
func (r reply) must(t testing.TB, status int) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("%v, want %d", r, status)
	}
	return r
}

// ok fails the test unless the answer is a 2xx.
func (r reply) ok(t testing.TB) reply {
	t.Helper()
	if r.status < 200 || r.status > 299 {
		t.Fatalf("%v, want success", r)
	}
	return r
}

// refused fails the test unless the answer has this status and, when
// gates are given, names one of them.
func (r reply) refused(t testing.TB, status int, gates ...string) reply {
	t.Helper()
	if r.status != status || r.err.Error == "" {
		t.Fatalf("%v, want %d with a message", r, status)
	}
	if len(gates) > 0 && !slices.Contains(gates, r.err.Gate) {
		t.Fatalf("%v: gate %q, want one of %q", r, r.err.Gate, gates)
	}
	return r
}

// decode decodes a successful answer's body.
func decode[T any](t testing.TB, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%v: %v", r, err)
	}
	return v
}

// logged is what the attack tests read of a logged event.
type logged struct {
	Kind    string `json:"kind"`
	Actor   string `json:"actor"`
	Session string `json:"session"`
	Action  *struct {
		Type      string          `json:"type"`
		Target    string          `json:"target"`
		Envelope  string          `json:"envelope"`
		Payload   json.RawMessage `json:"payload"`
		Resources *api.Resources  `json:"resources"`
	} `json:"action"`
	Decision *struct {
		Outcome  string `json:"outcome"`
		Cost     uint64 `json:"cost"`
		Reserved uint64 `json:"reserved"`
		Settled  uint64 `json:"settled"`
	} `json:"decision"`
	Hold *struct {
		ID string `json:"id"`
	} `json:"hold"`
	raw []byte
}

// logSize is the log's size as GET /v1/info gives it.
func (ts *testServer) logSize(t testing.TB) uint64 {
	t.Helper()
	return decode[api.Info](t, ts.call(t, "GET", "/v1/info", "", nil).must(t, http.StatusOK)).Size
}

// event reads entry i with GET /v1/events/<i>.
func (ts *testServer) event(t testing.TB, i uint64) logged {
	t.Helper()
	r := ts.call(t, "GET", fmt.Sprintf("/v1/events/%d", i), "", nil).must(t, http.StatusOK)
	e := decode[logged](t, r)
	e.raw = r.body
	return e
}

// events reads the entries [from, to).
func (ts *testServer) events(t testing.TB, from, to uint64) []logged {
	t.Helper()
	var out []logged
	for i := from; i < to; i++ {
		out = append(out, ts.event(t, i))
	}
	return out
}

// noNewActions fails the test if an action event by actor was logged at
// or after index from.
func (ts *testServer) noNewActions(t testing.TB, from uint64, actor string) {
	t.Helper()
	to := ts.logSize(t)
	for i, e := range ts.events(t, from, to) {
		if e.Kind == "action" && e.Actor == actor {
			t.Fatalf("entry %d is an action of %s: %s", from+uint64(i), actor, e.raw)
		}
	}
}

// unchanged fails the test if the log grew since size.
func (ts *testServer) unchanged(t testing.TB, size uint64, what string) {
	t.Helper()
	if now := ts.logSize(t); now != size {
		t.Fatalf("%s: the log grew from %d to %d entries", what, size, now)
	}
}

var workspace = []api.Grant{{Pattern: "workspace/**", Actions: []string{"*"}}}

// agentSpec is an agent that root creates.
type agentSpec struct {
	name      string
	trust     float64 // 0: none, Ring 3
	consensus bool
	energy    uint64
	grants    []api.Grant
	expires   string
}

// newAgent has root create an agent and returns its id and credential.
func (ts *testServer) newAgent(t testing.TB, s agentSpec) (string, string) {
	t.Helper()
	req := api.AgentRequest{Name: s.name, Purpose: "attack test", Energy: s.energy, Grants: s.grants, Expires: s.expires, Consensus: s.consensus}
	if s.trust > 0 {
		req.Trust = &s.trust
	}
	a := decode[api.Agent](t, ts.call(t, "POST", "/v1/agents", ts.rootCred, req).must(t, http.StatusCreated))
	return a.ID, a.Credential
}

// issue issues or delegates an envelope as the actor with credential cred.
func (ts *testServer) issue(t testing.TB, cred string, req api.EnvelopeRequest) api.Envelope {
	t.Helper()
	return decode[api.Envelope](t, ts.call(t, "POST", "/v1/envelopes", cred, req).must(t, http.StatusCreated))
}

// mutate is a mutate of target as the actor with credential cred.
func (ts *testServer) mutate(t testing.TB, cred, target, envelope string) reply {
	t.Helper()
	return ts.call(t, "POST", "/v1/actions", cred, api.ActionRequest{Type: "mutate", Target: target, Envelope: envelope})
}

// activeSession has owner (root or an agent) create session id with
// config, admit the agents (each joins itself) and make it ACTIVE.
func (ts *testServer) activeSession(t testing.TB, ownerCred, id, config string, joinCreds ...string) {
	t.Helper()
	body := `{"id":"` + id + `"}`
	if config != "" {
		body = `{"id":"` + id + `","config":` + config + `}`
	}
	ts.call(t, "POST", "/v1/sessions", ownerCred, body).must(t, http.StatusCreated)
	change := func(cred string, req api.SessionChangeRequest) {
		ts.call(t, "POST", "/v1/sessions/"+id+"/changes", cred, req).must(t, http.StatusOK)
	}
	change(ownerCred, api.SessionChangeRequest{Op: "state", State: "HANDSHAKING"})
	for _, c := range joinCreds {
		change(c, api.SessionChangeRequest{Op: "join"})
	}
	change(ownerCred, api.SessionChangeRequest{Op: "state", State: "ACTIVE"})
}
