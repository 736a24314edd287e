package logserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

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
