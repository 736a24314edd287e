package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
)

func TestHistoryAPI(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	agent, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: "a", Purpose: "p", Energy: 1000,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"observe"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ac, _ := client.New(ts.srv.URL, agent.Credential)
	for i := range 5 {
		if _, err := ac.Submit(ctx, api.ActionRequest{Type: "observe", Target: fmt.Sprintf("workspace/%d", i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.root.Submit(ctx, api.ActionRequest{Type: "mutate", Target: fmt.Sprintf("root/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := ac.History(ctx, url.Values{"limit": {"3"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 3 || page.NextCursor == nil {
		t.Fatalf("a first page of 3: %+v", page)
	}
	for i, e := range page.Events {
		leaf := sha256.Sum256(append([]byte{0}, e.Event...))
		if hex.EncodeToString(leaf[:]) != e.LeafHash {
			t.Fatalf("event %d is not the exact logged entry of its leaf hash", e.Index)
		}
		if i > 0 && e.Index >= page.Events[i-1].Index {
			t.Fatal("not newest first")
		}
		raw, err := ts.root.Event(ctx, e.Index)
		if err != nil || string(raw) != string(e.Event) {
			t.Fatalf("event %d differs from GET /v1/events/%d", e.Index, e.Index)
		}
	}
	// The agent sees only its own events; root sees both.
	all, err := ac.History(ctx, url.Values{"limit": {"500"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Events) != 5 {
		t.Fatalf("the agent sees %d events, want its 5 actions", len(all.Events))
	}
	rootView, _ := ts.root.History(ctx, url.Values{"target": {"root/"}, "order": {"oldest"}})
	if len(rootView.Events) != 5 {
		t.Fatalf("root's target filter: %d events", len(rootView.Events))
	}
	var ce *client.Error
	if _, err := ac.History(ctx, url.Values{"actor": {"root"}}); !errors.As(err, &ce) || ce.Status != http.StatusForbidden {
		t.Fatalf("an agent asking for root's history: %v", err)
	}
	for _, bad := range []url.Values{
		{"acter": {"x"}}, {"limit": {"0"}}, {"limit": {"501"}}, {"order": {"sideways"}}, {"cursor": {"-1"}},
		{"since": {"yesterday"}}, {"actor": {"a", "b"}},
	} {
		if _, err := ts.root.History(ctx, bad); !errors.As(err, &ce) || ce.Status != http.StatusBadRequest {
			t.Errorf("GET /v1/events?%s: %v, want 400", bad.Encode(), err)
		}
	}
	resp, err := http.Get(ts.srv.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the history without a credential: %d", resp.StatusCode)
	}
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	id   string
	item api.HistoryItem
}

// openStream connects to GET /v1/events/stream and returns a channel of
// its events (closed when the stream ends).
func openStream(t *testing.T, ts *testServer, cred, query, lastID string) (<-chan sseEvent, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.srv.URL+"/v1/events/stream?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 100)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				cur.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.item)
			case line == "" && cur.id != "":
				out <- cur
				cur = sseEvent{}
			}
		}
	}()
	return out, cancel
}

func next(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return sseEvent{}
}

func TestHistoryStreamIsLiveAndResumes(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	live, stop := openStream(t, ts, ts.rootCred, "type=observe", "")
	defer stop()
	var receipts []*api.Receipt
	for i := range 3 {
		ts.root.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "x/" + strconv.Itoa(i)}) // filtered out
		rc, err := ts.root.Submit(ctx, api.ActionRequest{Type: "observe", Target: "y/" + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, rc)
	}
	for _, rc := range receipts {
		e := next(t, live)
		if e.id != strconv.FormatUint(rc.Index, 10) || e.item.Index != rc.Index || e.item.LeafHash != rc.LeafHash {
			t.Fatalf("stream event %+v, want receipt %+v", e, rc)
		}
	}
	stop()
	// A reconnect after the first event gets the other two, and nothing else.
	resumed, stop2 := openStream(t, ts, ts.rootCred, "type=observe", strconv.FormatUint(receipts[0].Index, 10))
	defer stop2()
	for _, rc := range receipts[1:] {
		if e := next(t, resumed); e.item.Index != rc.Index {
			t.Fatalf("resumed stream gave %d, want %d", e.item.Index, rc.Index)
		}
	}
	for _, bad := range []string{"limit=5", "order=oldest", "acter=x"} {
		req, _ := http.NewRequest(http.MethodGet, ts.srv.URL+"/v1/events/stream?"+bad, nil)
		req.Header.Set("Authorization", "Bearer "+ts.rootCred)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("stream?%s: %d", bad, resp.StatusCode)
		}
	}
}

// A 404 says what was not found, not what Go's file system said.
func TestNotFoundLeaksNothing(t *testing.T) {
	ts := newTestServer(t)
	for _, path := range []string{"/v1/events/99999", "/v1/actors/nobody", "/tile/0/999", "/tile/entries/999.p/3", "/v1/proof/99999"} {
		req, _ := http.NewRequest(http.MethodGet, ts.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+ts.rootCred)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusConflict {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
		for _, leak := range []string{"file does not exist", "no such file", ts.k.LogPath(), "open /", ".go:"} {
			if strings.Contains(string(body), leak) {
				t.Errorf("%s answered %q, which leaks %q", path, body, leak)
			}
		}
	}
}

// FuzzHistoryQuery: any query string is refused or read into a query
// within bounds, never a panic.
func FuzzHistoryQuery(f *testing.F) {
	for _, seed := range []string{"", "actor=agent-1&limit=5", "order=oldest&cursor=7", "since=2026-11-23T10:00:00Z&until=2026-11-24T00:00:00.5Z",
		"limit=0", "limit=501", "acter=x", "actor=a&actor=b", "target=workspace%2F", "cursor=18446744073709551615", "order=%00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		values, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseHistoryQuery(values)
		if err != nil {
			return
		}
		if q.Limit < 0 || q.Limit > kernel.MaxHistoryPage {
			t.Fatalf("limit %d accepted", q.Limit)
		}
		for name := range values {
			if !historyParams[name] {
				t.Fatalf("unknown parameter %q accepted", name)
			}
		}
	})
}

// historyAnswer is the start of an answer to GET path?query: its status,
// content type and, unless it is a stream, its body. It does not wait for
// a stream's first event: a refusal must come before any.
func historyAnswer(t *testing.T, ts *testServer, cred, path string, query url.Values) (int, string, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.srv.URL+path+"?"+query.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s?%s: %v", path, query.Encode(), err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if ct == "text/event-stream" {
		return resp.StatusCode, ct, nil
	}
	body := map[string]any{}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("GET %s?%s answered %d %q", path, query.Encode(), resp.StatusCode, raw)
	}
	return resp.StatusCode, ct, body
}

// wantRefusedAtOnce checks that both the list and the stream refuse query
// with 403 and a JSON error, the stream before it streams anything.
func wantRefusedAtOnce(t *testing.T, ts *testServer, cred, who string, query url.Values) {
	t.Helper()
	for _, path := range []string{"/v1/events", "/v1/events/stream"} {
		status, ct, body := historyAnswer(t, ts, cred, path, query)
		if status != http.StatusForbidden || ct != "application/json" || body["error"] == nil {
			t.Errorf("%s: GET %s?%s answered %d %s %v, want 403 with a JSON error", who, path, query.Encode(), status, ct, body)
		}
	}
}

// historyFixture: a human h with agents a and b; h issued envelope e1 to
// a, a delegated e2 to b, and b acted under e2; agent c, which root
// created, has its own envelope and session; h2 is another human.
type historyFixture struct {
	ts                 *testServer
	h, h2, a, b, c     *client.Client
	e1, e2, ec, bAct   string
	sessionC           string
	bActIndex, cActIdx uint64
	creds              map[*client.Client]string
}

func (f *historyFixture) cred(c *client.Client) string { return f.creds[c] }

func newHistoryFixture(t *testing.T) *historyFixture {
	t.Helper()
	ctx := context.Background()
	f := &historyFixture{ts: newTestServer(t), creds: map[*client.Client]string{}}
	f.creds[f.ts.root] = f.ts.rootCred
	trust := 0.9
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate", "observe"}}}
	mk := func(by *client.Client, req api.AgentRequest) (*client.Client, string) {
		t.Helper()
		na, err := by.CreateAgent(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(f.ts.srv.URL, na.Credential)
		if err != nil {
			t.Fatal(err)
		}
		f.creds[c] = na.Credential
		return c, na.ID
	}
	var aID, bID, cID string
	f.h, _ = mk(f.ts.root, api.AgentRequest{Kind: "human", Name: "Hana", Purpose: "oversees", Energy: 100000, Grants: grants})
	f.h2, _ = mk(f.ts.root, api.AgentRequest{Kind: "human", Name: "Hugo", Purpose: "oversees others", Energy: 1000})
	f.a, aID = mk(f.h, api.AgentRequest{Name: "a", Purpose: "delegates", Energy: 10000, Trust: &trust, Grants: grants})
	f.b, bID = mk(f.h, api.AgentRequest{Name: "b", Purpose: "works", Energy: 10000, Trust: &trust, Grants: grants})
	f.c, cID = mk(f.ts.root, api.AgentRequest{Name: "c", Purpose: "elsewhere", Energy: 10000, Trust: &trust, Grants: grants})
	issue := func(by *client.Client, req api.EnvelopeRequest) string {
		t.Helper()
		v, err := by.IssueEnvelope(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	f.e1 = issue(f.h, api.EnvelopeRequest{Holder: aID, Budget: 5000, Grants: grants})
	f.e2 = issue(f.a, api.EnvelopeRequest{Holder: bID, Parent: f.e1, Budget: 1000, Grants: grants})
	f.ec = issue(f.ts.root, api.EnvelopeRequest{Holder: cID, Budget: 1000, Grants: grants})
	rc, err := f.b.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/b/1", Envelope: f.e2})
	if err != nil {
		t.Fatal(err)
	}
	f.bAct, f.bActIndex = bID, rc.Index
	if rc, err = f.c.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/c/1", Envelope: f.ec}); err != nil {
		t.Fatal(err)
	}
	f.cActIdx = rc.Index
	f.sessionC = "session-of-c"
	if _, err := f.c.CreateSession(ctx, api.SessionRequest{ID: f.sessionC}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAttack_StreamOtherActorRefusedAtOnce: asking for the events of an
// actor outside one's oversight is refused with 403 at once by the stream,
// as by the list — not a 200 stream that reports the refusal once some
// event lands.
func TestAttack_StreamOtherActorRefusedAtOnce(t *testing.T) {
	f := newHistoryFixture(t)
	// An agent may not read root's, its sibling's or another human's agent's.
	for _, other := range []string{"root", f.bAct} {
		wantRefusedAtOnce(t, f.ts, f.cred(f.c), "agent c", url.Values{"actor": {other}})
	}
	wantRefusedAtOnce(t, f.ts, f.cred(f.h2), "human h2", url.Values{"actor": {f.bAct}})
	// With other filters, a cursor or a bad Last-Event-ID alike.
	wantRefusedAtOnce(t, f.ts, f.cred(f.c), "agent c", url.Values{"actor": {"root"}, "kind": {"action"}, "cursor": {"0"}})
	// The creator may; so may root.
	for who, cred := range map[string]string{"h": f.cred(f.h), "root": f.ts.rootCred} {
		if status, ct, _ := historyAnswer(t, f.ts, cred, "/v1/events/stream", url.Values{"actor": {f.bAct}}); status != http.StatusOK || ct != "text/event-stream" {
			t.Errorf("%s streaming b's events: %d %s", who, status, ct)
		}
	}
}

// TestAttack_HistoryOtherEnvelopeRefused: the events under an envelope
// are read by root, its holder, whoever oversees the holder (its creator,
// as for actor=) and the issuers of its chain; anyone else is refused with
// 403 by the list and the stream alike, not answered an empty page.
func TestAttack_HistoryOtherEnvelopeRefused(t *testing.T) {
	f := newHistoryFixture(t)
	ctx := context.Background()
	wantRefusedAtOnce(t, f.ts, f.cred(f.c), "agent c", url.Values{"envelope": {f.e2}})
	wantRefusedAtOnce(t, f.ts, f.cred(f.h2), "human h2", url.Values{"envelope": {f.e2}})
	wantRefusedAtOnce(t, f.ts, f.cred(f.b), "agent b", url.Values{"envelope": {f.e1}}) // its parent envelope is a's
	wantRefusedAtOnce(t, f.ts, f.cred(f.h), "human h", url.Values{"envelope": {f.ec}})
	wantRefusedAtOnce(t, f.ts, f.cred(f.c), "agent c", url.Values{"envelope": {"env-00112233aabbccdd"}}) // no such envelope
	// Those who may read e2 see b's action under it, whoever they oversee.
	for who, c := range map[string]*client.Client{"holder b": f.b, "delegator a": f.a, "h, b's creator and e1's issuer": f.h, "root": f.ts.root} {
		page, err := c.History(ctx, url.Values{"envelope": {f.e2}, "kind": {"action"}})
		if err != nil || len(page.Events) != 1 || page.Events[0].Index != f.bActIndex {
			t.Errorf("%s reading e2: %+v %v, want b's action at %d", who, page, err, f.bActIndex)
		}
		if status, ct, _ := historyAnswer(t, f.ts, f.cred(c), "/v1/events/stream", url.Values{"envelope": {f.e2}}); status != http.StatusOK || ct != "text/event-stream" {
			t.Errorf("%s streaming e2: %d %s", who, status, ct)
		}
	}
}

// TestAttack_HistoryOtherSessionRefused: a session's events are read by
// root, its creator and participants and those who oversee them (as
// GET /v1/sessions/{id} shows the session); anyone else is refused with
// 403 by the list and the stream alike.
func TestAttack_HistoryOtherSessionRefused(t *testing.T) {
	f := newHistoryFixture(t)
	ctx := context.Background()
	wantRefusedAtOnce(t, f.ts, f.cred(f.b), "agent b", url.Values{"session": {f.sessionC}})
	wantRefusedAtOnce(t, f.ts, f.cred(f.h), "human h", url.Values{"session": {f.sessionC}})
	wantRefusedAtOnce(t, f.ts, f.cred(f.b), "agent b", url.Values{"session": {"no-such-session"}})
	for who, c := range map[string]*client.Client{"creator c": f.c, "root": f.ts.root} {
		page, err := c.History(ctx, url.Values{"session": {f.sessionC}})
		if err != nil || len(page.Events) != 1 {
			t.Errorf("%s reading c's session: %+v %v", who, page, err)
		}
	}
}
