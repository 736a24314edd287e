package matrixbridge

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/matrixbridge/matrixtest"
	"github.com/annal-dev/annal/server"
)

// annald is a kernel served on a loopback port, as annald serve does.
type annald struct {
	url  string
	k    *kernel.Kernel
	root *client.Client
	cred string // root's
	stop func()
}

func startAnnald(t *testing.T, configure func(*kernel.Config)) *annald {
	t.Helper()
	return startAnnaldIn(t, t.TempDir(), configure)
}

// startAnnaldIn serves a kernel on dir until the test ends or stop.
func startAnnaldIn(t *testing.T, dir string, configure func(*kernel.Config)) *annald {
	t.Helper()
	cfg := kernel.DefaultConfig(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.CheckpointInterval = 100 * time.Millisecond
	if configure != nil {
		configure(&cfg)
	}
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(k, cfg.Logger))
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Close()
			k.Close()
		})
	}
	t.Cleanup(stop)
	raw, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}
	cred := strings.TrimSpace(string(raw))
	root, err := client.New(srv.URL, cred)
	if err != nil {
		t.Fatal(err)
	}
	return &annald{url: srv.URL, k: k, root: root, cred: cred, stop: stop}
}

// overseen is a human, created by root, and an agent that human created,
// whose envelope holds every mutate under workspace/release/ for a human.
type overseen struct {
	human      *api.Agent
	humanC     *client.Client
	agent      *api.Agent
	agentC     *client.Client
	otherHuman *api.Agent // a human who does not oversee the agent
}

func (a *annald) overseen(t *testing.T) *overseen {
	t.Helper()
	ctx := context.Background()
	alice, err := a.root.CreateAgent(ctx, api.AgentRequest{Kind: "human", Name: "alice", Purpose: "oversees the scribe", Energy: 5000,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.root.CreateAgent(ctx, api.AgentRequest{Kind: "human", Name: "carol", Purpose: "oversees nothing here"})
	if err != nil {
		t.Fatal(err)
	}
	aliceC, _ := client.New(a.url, alice.Credential)
	trust := 0.8
	scribe, err := aliceC.CreateAgent(ctx, api.AgentRequest{Name: "scribe", Purpose: "keeps release notes", Energy: 1000, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aliceC.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: scribe.ID, Budget: 500,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}},
		HoldOn: []api.Grant{{Pattern: "workspace/release/*", Actions: []string{"mutate"}}}}); err != nil {
		t.Fatal(err)
	}
	scribeC, _ := client.New(a.url, scribe.Credential)
	return &overseen{human: alice, humanC: aliceC, agent: scribe, agentC: scribeC, otherHuman: other}
}

// held has the agent submit a mutate the envelope holds, and returns the
// hold's id.
func (o *overseen) held(t *testing.T, target string) string {
	t.Helper()
	rc, err := o.agentC.Submit(context.Background(), api.ActionRequest{Type: "mutate", Target: target, Payload: []byte(`{"text":"v2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if rc.HoldID == "" {
		t.Fatalf("the mutate of %s was not held: %+v", target, rc)
	}
	return rc.HoldID
}

// TestSpec000_5_1_RemoteControlOverMatrix: the remote control entry point
// of §5.1 over Matrix, against a real homeserver. A hold is posted with its
// action, target, rule and budget; a Matrix user the configuration does not
// map is refused and changes nothing; the mapped user's approval (with a
// reason) and rejection (a reply to the post) are logged as that human's,
// not the bridge's; history and status answer; kill waits for the same
// person's confirmation.
func TestSpec000_5_1_RemoteControlOverMatrix(t *testing.T) {
	hs := matrixtest.Need(t)
	a := startAnnald(t, nil)
	o := a.overseen(t)
	bot, aliceMx, bobMx := register(t, hs, "annal-bot"), register(t, hs, "alice"), register(t, hs, "bob")
	r := matrixtest.NewRoom(t, aliceMx, bot.UserID, bobMx)
	startBridge(t, hs, bot, r, a.url, a.cred, map[id.UserID]string{aliceMx.UserID: o.human.Credential})
	ctx := context.Background()

	hold := o.held(t, "workspace/release/notes.md")
	post := r.WaitPost(t, "Hold "+hold, o.agent.ID, "mutate workspace/release/notes.md", "hold_on workspace/release/*", "budget:", "reserved")

	t.Run("an unmapped user's answer is refused", func(t *testing.T) {
		r.Say(t, bobMx, "!approve "+hold+" sure", "")
		r.WaitPost(t, "Refused", string(bobMx.UserID), "not mapped", "Nothing was done")
		if h, err := a.root.Hold(ctx, hold); err != nil || h.Status != "pending" {
			t.Fatalf("after bob's refused approval the hold is %+v (%v), want pending", h, err)
		}
	})

	t.Run("the mapped human approves with a reason", func(t *testing.T) {
		r.Say(t, aliceMx, "!approve "+hold+" notes checked", "")
		r.WaitPost(t, "Hold "+hold+" approved by alice ("+o.human.ID+")", "notes checked")
		h, err := a.root.Hold(ctx, hold)
		if err != nil {
			t.Fatal(err)
		}
		if h.Status != "approved" || h.AnsweredBy != o.human.ID || h.Reason != "notes checked" {
			t.Fatalf("the hold after alice's approval: status %q answered_by %q reason %q; want approved by %s with her reason", h.Status, h.AnsweredBy, h.Reason, o.human.ID)
		}
		answer := holdAnswerEntry(t, a, hold)
		if !strings.Contains(answer, `"answered_by":"`+o.human.ID+`"`) || !strings.Contains(answer, `"reason":"notes checked"`) {
			t.Fatalf("the log's answer to %s does not name alice and her reason: %s", hold, answer)
		}
	})

	t.Run("a reply to a hold's post rejects it", func(t *testing.T) {
		second := o.held(t, "workspace/release/v2.md")
		p := r.WaitPost(t, "Hold "+second)
		r.Say(t, aliceMx, "!reject too early", p.ID)
		r.WaitPost(t, "Hold "+second+" rejected by alice", "too early")
		if h, _ := a.root.Hold(ctx, second); h.Status != "rejected" || h.AnsweredBy != o.human.ID || h.Reason != "too early" {
			t.Fatalf("the hold after alice's rejection: %+v", h)
		}
	})
	_ = post

	t.Run("a hold answered elsewhere is told", func(t *testing.T) {
		third := o.held(t, "workspace/release/v3.md")
		r.WaitPost(t, "Hold "+third)
		if _, err := a.root.AnswerHold(ctx, third, "reject", "answered in the console"); err != nil {
			t.Fatal(err)
		}
		r.WaitPost(t, "Hold "+third+" ended outside this room: rejected by root", "answered in the console")
	})

	t.Run("dashboard, history and status answer", func(t *testing.T) {
		r.Say(t, aliceMx, "!history "+o.agent.ID+" 5", "")
		r.WaitPost(t, "Newest entries of "+o.agent.ID, "hold.requested mutate workspace/release/notes.md")
		r.Say(t, aliceMx, "!history", "")
		r.WaitPost(t, "Newest entries:", "approve by "+o.human.ID+": notes checked")
		r.Say(t, aliceMx, "!dashboard", "")
		r.WaitPost(t, "Log "+a.k.Origin()+":", "entries", "holds waiting for alice ("+o.human.ID+"): 0", o.agent.ID+" (scribe): active")
		r.Say(t, aliceMx, "!status "+o.agent.ID, "")
		r.WaitPost(t, o.agent.ID+" (agent, scribe): active", "ring: 2", "energy:", "balance")
		r.Say(t, bobMx, "!status "+o.agent.ID, "")
		r.WaitPost(t, "Refused", string(bobMx.UserID))
	})

	t.Run("freeze and stop wait for a confirmation", func(t *testing.T) {
		r.Say(t, aliceMx, "!stop "+o.agent.ID, "")
		code := confirmCode(t, r.WaitPost(t, "To stop "+o.agent.ID, "!confirm"))
		if n := len(entriesOfKind(t, a, "signal.sent")); n != 0 {
			t.Fatalf("before the confirmation the log has %d signal(s)", n)
		}
		r.Say(t, aliceMx, "!confirm "+code, "")
		r.WaitPost(t, o.agent.ID+" stopped by alice", "asked in Matrix by alice")
		if sent := entriesOfKind(t, a, "signal.sent"); len(sent) != 1 || !strings.Contains(sent[0], `"actor":"`+o.human.ID+`"`) || !strings.Contains(sent[0], "SIGSTOP") {
			t.Fatalf("the stop is not logged as alice's SIGSTOP: %q", sent)
		}
		r.Say(t, aliceMx, "!freeze "+o.agent.ID+" look first", "")
		code = confirmCode(t, r.WaitPost(t, "To freeze "+o.agent.ID))
		r.Say(t, aliceMx, "!confirm "+code, "")
		r.WaitPost(t, o.agent.ID+" frozen by alice", "look first")
		if s := agentStatus(t, a, o.agent.ID); s != "frozen" {
			t.Fatalf("after the confirmed freeze the agent is %s", s)
		}
		if _, err := o.humanC.SetStatus(ctx, o.agent.ID, "active", "thawed for the kill test"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("kill waits for the same person's confirmation", func(t *testing.T) {
		r.Say(t, aliceMx, "!kill "+o.agent.ID+" runaway loop", "")
		code := confirmCode(t, r.WaitPost(t, "To kill "+o.agent.ID, "!confirm"))
		if s := agentStatus(t, a, o.agent.ID); s != "active" {
			t.Fatalf("before the confirmation the agent is %s", s)
		}
		r.Say(t, bobMx, "!confirm "+code, "")
		r.WaitPost(t, "Refused", string(bobMx.UserID))
		if s := agentStatus(t, a, o.agent.ID); s != "active" {
			t.Fatalf("after bob's refused confirmation the agent is %s", s)
		}
		r.Say(t, aliceMx, "!confirm 000000x", "")
		r.WaitPost(t, "No command waits for confirmation")
		r.Say(t, aliceMx, "!confirm "+code, "")
		r.WaitPost(t, o.agent.ID+" killed by alice ("+o.human.ID+")", "runaway loop")
		if s := agentStatus(t, a, o.agent.ID); s != "terminated" {
			t.Fatalf("after alice's confirmation the agent is %s, want terminated", s)
		}
		killed := entriesOfKind(t, a, "agent.killed")
		if len(killed) != 1 || !strings.Contains(killed[0], `"actor":"`+o.human.ID+`"`) {
			t.Fatalf("the kill is not logged as alice's: %s", killed)
		}
		r.Say(t, aliceMx, "!confirm "+code, "")
		r.WaitPost(t, "No command waits for confirmation")
	})
}

func agentStatus(t *testing.T, a *annald, agent string) string {
	t.Helper()
	act, err := a.root.Actor(context.Background(), agent)
	if err != nil {
		t.Fatal(err)
	}
	return act.Status
}

// holdAnswerEntry is the log's entry that answered hold.
func holdAnswerEntry(t *testing.T, a *annald, hold string) string {
	t.Helper()
	page, err := a.root.History(context.Background(), url.Values{"order": {"newest"}, "limit": {"50"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Events {
		s := string(e.Event)
		if strings.Contains(s, `"id":"`+hold+`"`) && strings.Contains(s, `"decision":`) {
			return s
		}
	}
	t.Fatalf("no entry answers %s", hold)
	return ""
}

// entriesOfKind are the log's entries of one kind, newest first.
func entriesOfKind(t *testing.T, a *annald, kind string) []string {
	t.Helper()
	page, err := a.root.History(context.Background(), url.Values{"order": {"newest"}, "limit": {"50"}, "kind": {kind}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range page.Events {
		out = append(out, string(e.Event))
	}
	return out
}

// confirmCode is the code a confirmation request asks for.
func confirmCode(t *testing.T, ask *event.Event) string {
	t.Helper()
	m := regexp.MustCompile(`!confirm (\d{6})`).FindStringSubmatch(ask.Content.AsMessage().Body)
	if m == nil {
		t.Fatalf("no code in %q", ask.Content.AsMessage().Body)
	}
	return m[1]
}

// TestSpec000_5_1_OnlyHumansAreMapped: the bridge does not start when a
// Matrix user is mapped to an agent's credential, or when its own
// credential is an agent's: only humans answer holds and control agents.
func TestSpec000_5_1_OnlyHumansAreMapped(t *testing.T) {
	a := startAnnald(t, nil)
	o := a.overseen(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "agent.cred"), o.agent.Credential)
	writeFile(t, filepath.Join(dir, "bot.token"), "unused")
	cfg, err := ParseConfig([]byte(`{"homeserver": "http://127.0.0.1:1", "user_id": "@annal:localhost", "access_token_file": "bot.token",
		"room": "!r:localhost", "users": {"@mallory:localhost": {"credential_file": "agent.cred"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.dir = dir
	newClient := func(cred string) (*client.Client, error) { return client.New(a.url, cred) }
	_, err = New(context.Background(), cfg, Options{Watch: a.root, NewClient: newClient})
	if err == nil || !strings.Contains(err.Error(), "@mallory:localhost is mapped to "+o.agent.ID+", of kind agent") {
		t.Errorf("a Matrix user mapped to an agent: %v", err)
	}
	_, err = New(context.Background(), cfg, Options{Watch: o.agentC, NewClient: newClient})
	if err == nil || !strings.Contains(err.Error(), "the bridge's own credential is "+o.agent.ID) {
		t.Errorf("the bridge's own credential an agent's: %v", err)
	}
}
