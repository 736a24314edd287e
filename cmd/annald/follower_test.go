package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/verifier"
)

// waitFollowing waits until the kernel at u answers readyz as a follower
// that follows the log.
func waitFollowing(t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(u + "/v1/readyz")
		if err == nil {
			var r followerReadiness
			json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && r.Follower && r.Ready {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never answered readyz as a ready follower", u)
}

// A kernel that does not hold the write lease serves every read from the
// shared log and its own folded state, and forwards every write to the
// lease holder: an agent created and actions submitted through the
// follower (over the API and over MCP) are decided by the holder, and
// read back through the follower (entry, history, proof, checkpoint, the
// live stream, an MCP resource); a credential or console session the
// follower does not know yet is answered by the holder, not 401; a
// request already forwarded once is refused, not forwarded again; a body
// over every route's limit is refused by the follower.
func TestSpec002_StatelessExecution_FollowerServesReadsAndForwardsWrites(t *testing.T) {
	a := servicestest.NewAWS(t)
	dirA := t.TempDir()
	lease := []string{"--lease-ttl", "2s", "--checkpoint-interval", "1s"}
	active := startAWSDaemon(t, dirA, a, append(lease, "--lease-holder", "kernel-a")...)
	cred := active.rootCredential(t)
	follower := startAWSDaemon(t, copyIdentity(t, dirA), a, append(lease, "--lease-holder", "kernel-b")...)
	if !follower.standby {
		t.Fatal("the second annald did not start as a follower")
	}
	waitFollowing(t, follower.url)
	ctx := context.Background()
	root := follower.client(t, cred)
	trust := 0.8
	agent, err := root.CreateAgent(ctx, api.AgentRequest{Name: "a", Purpose: "cluster", Energy: 1000, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}})
	if err != nil {
		t.Fatalf("create an agent through the follower: %v", err)
	}
	if _, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: agent.ID, Budget: 500, Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}}); err != nil {
		t.Fatalf("issue an envelope through the follower: %v", err)
	}
	// The agent's credential is new: before the follower folded the entry
	// that created it, a read with it goes to the holder, not 401.
	ac := follower.client(t, agent.Credential)
	if who, err := ac.WhoAmI(ctx); err != nil || who.ID != agent.ID {
		t.Fatalf("whoami at once with a new credential through the follower: %+v %v", who, err)
	}
	rc, err := ac.Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/notes.md"})
	if err != nil {
		t.Fatalf("submit through the follower: %v", err)
	}
	// A credential no kernel knows: 401, from the holder.
	if _, err := follower.client(t, "annal_nobody").WhoAmI(ctx); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("an unknown credential through the follower: %v", err)
	}
	// The entry, read through the follower, is the one the holder logged.
	entry, err := ac.Event(ctx, rc.Index)
	if err != nil {
		t.Fatal(err)
	}
	fromHolder, err := active.client(t, agent.Credential).Event(ctx, rc.Index)
	if err != nil || string(fromHolder) != string(entry) {
		t.Fatalf("the follower's entry %d differs from the holder's: %v", rc.Index, err)
	}
	proof, err := ac.WaitProof(ctx, rc.Index)
	if err != nil {
		t.Fatalf("proof through the follower: %v", err)
	}
	if res, err := verifier.VerifyProof(entry, proof, active.vkey); err != nil || res.Index != rc.Index {
		t.Fatalf("the follower's proof: %+v %v", res, err)
	}
	if _, err := ac.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	// History, from the follower's own folded state.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		page, err := root.History(ctx, url.Values{"actor": {agent.ID}, "kind": {"action"}})
		if err == nil && len(page.Events) == 1 && page.Events[0].Index == rc.Index {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower's history never showed entry %d: %+v %v", rc.Index, page, err)
		}
	}
	// What the holder acknowledged a moment ago and the follower has not
	// folded yet (an agent, a hold the agent must wait for) is found by id
	// through the follower, which now answers from its own state: it asks
	// the holder rather than answer 404.
	holder := active.client(t, cred)
	fresh, err := holder.CreateAgent(ctx, api.AgentRequest{Name: "fresh", Purpose: "read at once", Energy: 100})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := root.Actor(ctx, fresh.ID); err != nil || got.ID != fresh.ID {
		t.Fatalf("an agent the holder created a moment ago, read by id through the follower: %+v %v", got, err)
	}
	holdEnv, err := holder.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: agent.ID, Budget: 100, Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}},
		HoldOn: []api.Grant{{Pattern: "workspace/held/*", Actions: []string{"mutate"}}}})
	if err != nil {
		t.Fatal(err)
	}
	held, err := active.client(t, agent.Credential).Submit(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/held/x", Envelope: holdEnv.ID})
	if err != nil || held.HoldID == "" {
		t.Fatalf("a held action at the holder: %+v %v", held, err)
	}
	if h, err := ac.Hold(ctx, held.HoldID); err != nil || h.ID != held.HoldID {
		t.Fatalf("a hold the holder made a moment ago, read through the follower: %+v %v", h, err)
	}
	if _, err := root.Actor(ctx, "agent-nobody"); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("an actor no kernel has, through the follower: %v", err)
	}

	// The live stream at the follower shows what the holder logs next.
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	streamed := make(chan uint64, 16)
	go root.Stream(streamCtx, url.Values{"kind": {"action"}}, &rc.Index, func(it api.HistoryItem) error {
		streamed <- it.Index
		return nil
	})

	// Over MCP at the follower: a tool call that acts is forwarded as an
	// API write, a resource is read from the follower.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: follower.url + "/mcp", HTTPClient: &http.Client{Transport: bearerRoundTripper{agent.Credential}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	viaMCP, res := submitOverMCP(t, cs, "workspace/via-mcp")
	if res.IsError || viaMCP.Status != "committed" || viaMCP.Index <= rc.Index {
		t.Fatalf("submit over the follower's /mcp: %+v %+v", viaMCP, res.Content)
	}
	select {
	case i := <-streamed:
		if i != viaMCP.Index {
			t.Fatalf("the follower's stream showed %d, the holder logged %d", i, viaMCP.Index)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the follower's stream never showed entry %d", viaMCP.Index)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: fmt.Sprintf("annal://events/%d", viaMCP.Index)})
	if err != nil || len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, "workspace/via-mcp") {
		t.Fatalf("read the event over the follower's /mcp: %+v %v", read, err)
	}

	// The console through the follower: the sign-in is forwarded and its
	// cookie comes back; a read with the cookie, a session the follower
	// did not open, goes to the holder that did.
	resp, err := http.Post(follower.url+"/ui/session", "application/json", strings.NewReader(`{"credential":"`+cred+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "annal_console" {
			session = c
		}
	}
	if resp.StatusCode != http.StatusOK || session == nil {
		t.Fatalf("sign in through the follower: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	req, _ := http.NewRequest("GET", follower.url+"/v1/whoami", nil)
	req.AddCookie(session)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var who api.Actor
	json.NewDecoder(resp.Body).Decode(&who)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || who.ID != "root" {
		t.Fatalf("the console's whoami through the follower: %d %+v", resp.StatusCode, who)
	}

	// A request forwarded once is not forwarded again.
	req, _ = http.NewRequest("POST", follower.url+"/v1/actions", strings.NewReader(`{"type":"mutate","target":"workspace/x"}`))
	req.Header.Set("Authorization", "Bearer "+agent.Credential)
	req.Header.Set(ForwardedHeader, "kernel-c")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a forwarded request at a follower: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// A body over the largest any route takes is refused by the follower.
	big := strings.Repeat("x", int(maxForwardBody(serveFlags{maxBlob: 16 << 20}))+1)
	resp, err = http.Post(follower.url+"/v1/blobs", "application/octet-stream", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized body at a follower: %d", resp.StatusCode)
	}
}
