package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
)

// getList is one GET of a list endpoint as root, raw: the status, the
// items and the Link header.
func getList(t *testing.T, ts *testServer, path string) (int, []map[string]any, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+ts.rootCred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var items []map[string]any
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &items); err != nil {
			t.Fatalf("GET %s: %s is not a list: %v", path, body, err)
		}
	}
	return resp.StatusCode, items, resp.Header.Get("Link")
}

// The list endpoints answer in pages linked by RFC 8288 Link headers, and
// the Go client reads every page: a kernel with more agents than a page
// (or than the client's answer limit would take in one body) lists them
// all, each once, in order.
func TestListsArePagedAndTheClientReadsEveryPage(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	const agents = 230 // more than the client's page of 200
	for i := range agents {
		a, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: fmt.Sprintf("a%d", i), Purpose: "paging", Energy: 10})
		if err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			if _, err := ts.root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 1, Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"observe"}}}}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// By hand: pages of 100 follow each other through Link and cover the
	// list once.
	seen := map[string]bool{}
	var order []string
	next, pages := "/v1/actors?limit=100", 0
	for next != "" {
		status, items, link := getList(t, ts, next)
		if status != http.StatusOK || len(items) == 0 || len(items) > 100 {
			t.Fatalf("GET %s: %d with %d items", next, status, len(items))
		}
		for _, it := range items {
			id := it["id"].(string)
			if seen[id] {
				t.Fatalf("actor %s on two pages", id)
			}
			seen[id] = true
			order = append(order, id)
		}
		pages++
		next = ""
		if link != "" {
			if !strings.HasSuffix(link, `>; rel="next"`) || !strings.HasPrefix(link, "</v1/actors?") {
				t.Fatalf("Link header %q", link)
			}
			next = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		}
	}
	if pages != 3 || len(order) != agents+1 { // the agents and root
		t.Fatalf("%d pages with %d actors, want 3 with %d", pages, len(order), agents+1)
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Fatalf("actors out of order across pages: %s before %s", order[i-1], order[i])
		}
	}

	// Without a limit, one page holds a small deployment whole.
	if status, items, link := getList(t, ts, "/v1/actors"); status != http.StatusOK || len(items) != agents+1 || link != "" {
		t.Fatalf("unlimited list: %d, %d items, Link %q", status, len(items), link)
	}

	// The client follows the pages.
	actors, err := ts.root.Actors(ctx)
	if err != nil || len(actors) != agents+1 {
		t.Fatalf("client listed %d actors (%v), want %d", len(actors), err, agents+1)
	}
	raw, err := ts.root.Rings(ctx)
	var rings []map[string]any
	if err != nil || json.Unmarshal(raw, &rings) != nil || len(rings) != agents {
		t.Fatalf("client listed %d rings (%v), want %d", len(rings), err, agents)
	}
	envelopes, err := ts.root.Envelopes(ctx)
	if err != nil || len(envelopes) < 3 {
		t.Fatalf("client listed %d envelopes (%v)", len(envelopes), err)
	}

	// Bad paging is refused, naming what is wrong.
	for _, bad := range []string{"/v1/actors?limit=0", "/v1/actors?limit=1001", "/v1/actors?limit=x", "/v1/actors?after=nobody", "/v1/rings?after=root", "/v1/sessions?after=s", "/v1/envelopes?limit=-1"} {
		if status, _, _ := getList(t, ts, bad); status != http.StatusBadRequest {
			t.Errorf("GET %s answered %d, want 400", bad, status)
		}
	}
	// The last page has no Link; a page after the last item is empty.
	last := order[len(order)-1]
	if status, items, link := getList(t, ts, "/v1/actors?after="+last); status != http.StatusOK || len(items) != 0 || link != "" {
		t.Fatalf("after the last actor: %d, %d items, Link %q", status, len(items), link)
	}
}
