package logserver

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

	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/logserver/api"
	"github.com/annal-dev/annal/logserver/client"
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
