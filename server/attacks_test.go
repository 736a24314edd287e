package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
)

// The attacks an outside tester made on the public API, each replayed over
// HTTP: the requests in, then the state through the API and the log through
// GET /v1/events/<i>. Every refusal is set beside the same request by an
// actor that may make it, which succeeds, so that no test passes because
// everything is refused.

// TestAttack_ActionsAfterControl: "Actions follow a revoke, freeze or
// quarantine in the log: with 24 clients acting as one agent, root revokes
// its envelope (or freezes or quarantines the agent); committed `action`
// events of that agent came after the control event." No action of the
// agent may be logged after the control event, and every receipt a client
// got names an index before it.
func TestAttack_ActionsAfterControl(t *testing.T) {
	const clients, perClient, rounds = 24, 40, 2 // rounds of each control
	ts := newAttackServer(t, func(c *kernel.Config) { c.DisableRateLimit = true })
	ctx := context.Background()
	controls := []struct {
		name, kind, gate string
		do               func(agent, env string) api.Receipt
	}{
		{"revoke", "envelope.revoked", "envelope", func(_, env string) api.Receipt {
			return decode[api.Receipt](t, ts.call(t, "POST", "/v1/envelopes/"+env+"/revoke", ts.rootCred, `{"reason":"race"}`).must(t, http.StatusOK))
		}},
		{"freeze", "actor.status", "actor", func(agent, _ string) api.Receipt {
			return decode[api.Receipt](t, ts.call(t, "POST", "/v1/actors/"+agent+"/status", ts.rootCred, `{"status":"frozen","reason":"race"}`).must(t, http.StatusOK))
		}},
		{"quarantine", "quarantine.started", "quarantine", func(agent, _ string) api.Receipt {
			return decode[api.Controlled](t, ts.call(t, "POST", "/v1/agents/"+agent+"/quarantine", ts.rootCred, `{"reason":"manual","duration_seconds":3600}`).must(t, http.StatusOK)).Receipt
		}},
		// Beyond the finding: a stop and a kill do not commute with the
		// agent's actions either.
		{"stop", "signal.sent", "actor", func(agent, _ string) api.Receipt {
			return decode[api.Controlled](t, ts.call(t, "POST", "/v1/agents/"+agent+"/signal", ts.rootCred, `{"signal":"SIGSTOP"}`).must(t, http.StatusOK)).Receipt
		}},
		{"kill", "agent.killed", "actor", func(agent, _ string) api.Receipt {
			return decode[api.Controlled](t, ts.call(t, "POST", "/v1/agents/"+agent+"/kill", ts.rootCred, `{"reason":"manual"}`).must(t, http.StatusOK)).Receipt
		}},
	}
	for round := range rounds * len(controls) {
		c := controls[round%len(controls)]
		agent, cred := ts.newAgent(t, agentSpec{name: "racer", trust: 0.8, energy: clients * perClient * 15, grants: workspace})
		env := ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: agent, Budget: clients * perClient * 15, Grants: workspace})
		start := ts.logSize(t)
		var (
			wg       sync.WaitGroup
			acted    atomic.Int64
			receipts = make([][]uint64, clients)
			stopped  = make([]error, clients)
		)
		for w := range clients {
			cl, err := client.New(ts.srv.URL, cred)
			if err != nil {
				t.Fatal(err)
			}
			cl = cl.WithHTTPClient(attackHTTP)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perClient { // bounded: a client stops at its first refusal
					r, err := cl.Submit(ctx, api.ActionRequest{Type: "mutate", Target: fmt.Sprintf("workspace/%d/%d/%d", round, w, i), Envelope: env.ID})
					if err != nil {
						stopped[w] = err
						return
					}
					receipts[w] = append(receipts[w], r.Index)
					acted.Add(1)
				}
			}()
		}
		// Let every client get going, so that the control lands among
		// actions in flight.
		for deadline := time.Now().Add(30 * time.Second); acted.Load() < 5*clients && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		ctl := c.do(agent, env.ID)
		wg.Wait()

		if e := ts.event(t, ctl.Index); e.Kind != c.kind || e.Actor != "root" {
			t.Fatalf("round %d (%s): the receipt's entry %d is %s", round, c.name, ctl.Index, e.raw)
		}
		refused := 0
		for w, err := range stopped {
			if err == nil {
				continue
			}
			refused++
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Status != http.StatusForbidden || ce.Gate != c.gate {
				t.Fatalf("round %d (%s): client %d stopped with %v, want 403 from the %s gate", round, c.name, w, err, c.gate)
			}
		}
		if refused == 0 {
			t.Fatalf("round %d (%s): every client finished before the control event; the round shows nothing", round, c.name)
		}
		committed := map[uint64]bool{}
		for w, rs := range receipts {
			for _, i := range rs {
				if i >= ctl.Index {
					t.Errorf("round %d (%s): client %d got a receipt for entry %d, at or after the control event at %d", round, c.name, w, i, ctl.Index)
				}
				committed[i] = true
			}
		}
		end := ts.logSize(t)
		logged := 0
		for i, e := range ts.events(t, start, end) {
			index := start + uint64(i)
			if e.Kind != "action" || e.Actor != agent {
				continue
			}
			logged++
			if index > ctl.Index {
				t.Errorf("round %d (%s): entry %d is an action of %s after the control event at %d: %s", round, c.name, index, agent, ctl.Index, e.raw)
			}
			if !committed[index] {
				t.Errorf("round %d (%s): entry %d is an action no client got a receipt for", round, c.name, index)
			}
		}
		if logged != len(committed) || logged == 0 {
			t.Fatalf("round %d (%s): %d receipts, %d actions in the log", round, c.name, len(committed), logged)
		}
		t.Logf("round %d (%s): %d actions before the control event at %d, %d clients refused after it", round, c.name, logged, ctl.Index, refused)
	}
}

// twin is an agent set up for TestAttack_NonActionsSkipActorGates: it holds
// an envelope from root, is elevated to Ring 2 for an hour, has delegated
// part of its envelope to another agent, and takes part in an ACTIVE
// session.
type twin struct {
	id, cred, env          string
	delegate, delegateCred string
	delegateEnv, session   string
}

func newTwin(t *testing.T, ts *testServer, name, expires string) twin {
	t.Helper()
	var w twin
	w.id, w.cred = ts.newAgent(t, agentSpec{name: name, trust: 0.55, energy: 10_000, grants: workspace, expires: expires})
	w.env = ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: w.id, Budget: 5000, Grants: workspace}).ID
	ts.call(t, "POST", "/v1/elevations", w.cred, api.ElevationRequest{Agent: w.id, Ring: 2, TTLSeconds: 3600, Reason: "setup"}).must(t, http.StatusCreated)
	w.delegate, w.delegateCred = ts.newAgent(t, agentSpec{name: name + "-delegate", trust: 0.8, energy: 10_000, grants: workspace})
	w.delegateEnv = ts.issue(t, w.cred, api.EnvelopeRequest{Holder: w.delegate, Parent: w.env, Budget: 1000, Grants: workspace}).ID
	ts.mutate(t, w.delegateCred, "workspace/"+w.delegate+"/before", w.delegateEnv).must(t, http.StatusOK)
	w.session = "s-" + w.id
	ts.activeSession(t, ts.rootCred, w.session, `{"min_eff_score":0.5}`, w.cred)
	return w
}

// TestAttack_NonActionsSkipActorGates: "Non-action requests skip the actor
// gates: an expired agent still delegates (issues a sub-envelope), masks
// signals, creates sessions, starts sagas, records deltas and elevates
// itself, and agents it delegated to keep acting. A quarantined agent still
// delegates, masks SIGSTOP/SIGTERM and elevates itself to Ring 2. A
// SIGSTOPped agent still delegates and masks, and its delegates keep
// acting." Each request is made first by a twin agent set up the same way
// that may still act (it succeeds), then by the expired, quarantined or
// stopped agent (403 from the actor or quarantine gate, nothing logged);
// the agent it delegated to is refused too.
func TestAttack_NonActionsSkipActorGates(t *testing.T) {
	hash := "sha256:" + strings.Repeat("ab", 32)
	ops := []struct {
		name string
		req  func(w twin) (method, path string, body any)
	}{
		{"delegate", func(w twin) (string, string, any) {
			return "POST", "/v1/envelopes", api.EnvelopeRequest{Holder: w.delegate, Parent: w.env, Budget: 10, Grants: workspace}
		}},
		{"mask SIGSTOP and SIGTERM", func(twin) (string, string, any) {
			return "PUT", "/v1/signals/mask", `{"mask":["SIGSTOP","SIGTERM"]}`
		}},
		{"create a session", func(w twin) (string, string, any) {
			return "POST", "/v1/sessions", `{"id":"new-` + w.id + `"}`
		}},
		{"start a saga", func(w twin) (string, string, any) {
			return "POST", "/v1/sagas", api.SagaRequest{ID: "saga-" + w.id, Steps: []api.Step{{ID: "one", Action: "a", Compensation: "b"}}}
		}},
		{"record a delta", func(w twin) (string, string, any) {
			return "POST", "/v1/sessions/" + w.session + "/deltas", api.DeltaRequest{TurnID: "t1", Changes: []api.Change{{Path: "f.txt", Operation: "create", ContentHash: hash}}}
		}},
		{"elevate itself to Ring 2", func(w twin) (string, string, any) {
			return "POST", "/v1/elevations", api.ElevationRequest{Agent: w.id, Session: w.session, Ring: 2, TTLSeconds: 600, Reason: "again"}
		}},
		{"act", func(w twin) (string, string, any) {
			return "POST", "/v1/actions", api.ActionRequest{Type: "mutate", Target: "workspace/" + w.id + "/after", Envelope: w.env}
		}},
	}
	for _, tc := range []struct {
		name string
		// gate refuses the agent itself, delegateGate an agent acting
		// under an envelope it delegated.
		gate, delegateGate string
		disable            func(t *testing.T, ts *testServer, clock *attackClock, agent string)
	}{
		{"expired", "actor", "envelope", func(_ *testing.T, _ *testServer, clock *attackClock, _ string) {
			clock.Advance(11 * time.Minute)
		}},
		{"quarantined", "quarantine", "quarantine", func(t *testing.T, ts *testServer, _ *attackClock, agent string) {
			ts.call(t, "POST", "/v1/agents/"+agent+"/quarantine", ts.rootCred, `{"reason":"manual","duration_seconds":3600}`).must(t, http.StatusOK)
		}},
		{"stopped", "actor", "envelope", func(t *testing.T, ts *testServer, _ *attackClock, agent string) {
			r := ts.call(t, "POST", "/v1/agents/"+agent+"/signal", ts.rootCred, `{"signal":"SIGSTOP"}`).must(t, http.StatusOK)
			if !strings.Contains(string(r.body), `"effect":"stop"`) {
				t.Fatalf("SIGSTOP: %v", r)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &attackClock{}
			ts := newAttackServer(t, func(c *kernel.Config) { c.Now = clock.Now; c.DisableRateLimit = true })
			expires := ""
			if tc.name == "expired" {
				expires = clock.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339Nano)
			}
			bad := newTwin(t, ts, "bad", expires)
			good := newTwin(t, ts, "good", "")
			tc.disable(t, ts, clock, bad.id)
			for _, op := range ops {
				t.Run(op.name, func(t *testing.T) {
					method, path, body := op.req(good)
					ts.call(t, method, path, good.cred, body).ok(t)
					before := ts.logSize(t)
					method, path, body = op.req(bad)
					ts.call(t, method, path, bad.cred, body).refused(t, http.StatusForbidden, tc.gate)
					if op.name == "act" {
						ts.noNewActions(t, before, bad.id) // its denial is recorded
					} else {
						ts.unchanged(t, before, op.name)
					}
				})
			}
			t.Run("acting under its delegation", func(t *testing.T) {
				ts.mutate(t, good.delegateCred, "workspace/"+good.delegate+"/after", good.delegateEnv).must(t, http.StatusOK)
				before := ts.logSize(t)
				ts.mutate(t, bad.delegateCred, "workspace/"+bad.delegate+"/after", bad.delegateEnv).refused(t, http.StatusForbidden, tc.delegateGate)
				ts.noNewActions(t, before, bad.delegate)
			})
		})
	}
}

// TestAttack_RateLimitSkipped: "Rate limit skipped: a Ring 3 agent (5/s,
// burst 10) got 40 of 40 signal-mask changes and 40 of 40 budget-0
// delegations through, each a log entry." Every request an agent makes
// draws from its bucket: after the burst it is a 429, and the log grows by
// at most the burst. The rate limiter's clock stands still, so no token is
// refilled and the burst is exact.
func TestAttack_RateLimitSkipped(t *testing.T) {
	const burst, tries = 10, 40 // Ring 3: 5/s, burst 10 (§9.2)
	frozen := time.Now()
	ts := newAttackServer(t, func(c *kernel.Config) { c.RateClock = func() time.Time { return frozen } })
	holder, _ := ts.newAgent(t, agentSpec{name: "holder", energy: 100})
	masker, maskerCred := ts.newAgent(t, agentSpec{name: "masker", energy: 100})
	delegator, delegatorCred := ts.newAgent(t, agentSpec{name: "delegator", energy: 100, grants: workspace})
	env := ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: delegator, Budget: 100, Grants: workspace})
	observer, observerCred := ts.newAgent(t, agentSpec{name: "observer", energy: 100})

	// Humans are not limited: root makes as many requests as it likes.
	for i := range tries {
		ts.call(t, "POST", "/v1/actions", ts.rootCred, api.ActionRequest{Type: "observe", Target: fmt.Sprintf("workspace/root/%d", i)}).must(t, http.StatusOK)
	}
	for _, tc := range []struct {
		name, agent, cred string
		req               func(i int) (method, path string, body any)
	}{
		{"signal mask", masker, maskerCred, func(i int) (string, string, any) {
			return "PUT", "/v1/signals/mask", api.MaskRequest{Mask: []string{[]string{"SIGTERM", "SIGINT"}[i%2]}}
		}},
		{"budget-0 delegation", delegator, delegatorCred, func(int) (string, string, any) {
			return "POST", "/v1/envelopes", api.EnvelopeRequest{Holder: holder, Parent: env.ID, Budget: 0, Grants: workspace}
		}},
		{"observe", observer, observerCred, func(i int) (string, string, any) {
			return "POST", "/v1/actions", api.ActionRequest{Type: "observe", Target: fmt.Sprintf("workspace/%d", i)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.logSize(t)
			passed, limited := 0, 0
			for i := range tries {
				method, path, body := tc.req(i)
				r := ts.call(t, method, path, tc.cred, body)
				switch {
				case r.status >= 200 && r.status < 300:
					if limited > 0 {
						t.Fatalf("request %d passed after %d were rate limited: %v", i, limited, r)
					}
					passed++
				case r.status == http.StatusTooManyRequests:
					if r.err.Gate != "rate_limit" || r.header.Get("Retry-After") == "" {
						t.Fatalf("429 without the rate_limit gate or Retry-After: %v %v", r, r.header)
					}
					limited++
				default:
					t.Fatalf("request %d: %v", i, r)
				}
			}
			grew := ts.logSize(t) - before
			if passed == 0 || passed > burst || limited != tries-passed {
				t.Fatalf("%s: %d of %d passed, %d rate limited; want the first requests up to the burst of %d to pass and the rest 429", tc.agent, passed, tries, limited, burst)
			}
			if grew != uint64(passed) {
				t.Fatalf("%s: %d requests passed but the log grew by %d", tc.agent, passed, grew)
			}
		})
	}
}

// TestAttack_CostFromFoldedMember: the cost case of "Case-variant JSON
// members" (the rest is in strictjson_test.go): an execute payload with
// "output_bytes":1000000 plus "output_byteſ":0 (U+017F) must be charged
// 3931 (25 + 1000000/256), whichever member comes first; "output_byteſ" is
// another member, not output_bytes. The receipt and the logged decision
// agree.
func TestAttack_CostFromFoldedMember(t *testing.T) {
	ts := newAttackServer(t, nil)
	agent, cred := ts.newAgent(t, agentSpec{name: "exec", trust: 0.8, energy: 100_000, grants: workspace})
	ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: agent, Budget: 50_000, Grants: workspace})
	oid := `"sha256:` + strings.Repeat("0f", 32) + `"`
	fields := `"input_oid":` + oid + `,"output_oid":` + oid + `,"artifact_hash":` + oid + `,"exit_code":0`
	var spent uint64
	for _, tc := range []struct {
		name, payload string
		cost          uint64
		members       []string
	}{
		{"output_bytes alone", `{` + fields + `,"output_bytes":1000000}`, 3931, []string{`"output_bytes":1000000`}},
		{"output_byteſ alone is not output_bytes", `{` + fields + `,"output_byteſ":1000000}`, 25, []string{`"output_byteſ":1000000`}},
		{"output_bytes then output_byteſ", `{` + fields + `,"output_bytes":1000000,"output_byteſ":0}`, 3931, []string{`"output_bytes":1000000`, `"output_byteſ":0`}},
		{"output_byteſ then output_bytes", `{"output_byteſ":0,` + fields + `,"output_bytes":1000000}`, 3931, []string{`"output_bytes":1000000`, `"output_byteſ":0`}},
		{"escaped ſ", `{` + fields + `,"output_bytes":1000000,"output_byte\u017f":0}`, 3931, []string{`"output_bytes":1000000`, `"output_byteſ":0`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.call(t, "POST", "/v1/actions", cred, `{"type":"execute","target":"workspace/run","payload":`+tc.payload+`}`).must(t, http.StatusOK)
			rc := decode[api.Receipt](t, r)
			if rc.Cost != tc.cost {
				t.Fatalf("receipt cost %d, want %d", rc.Cost, tc.cost)
			}
			e := ts.event(t, rc.Index)
			if e.Kind != "action" || e.Decision == nil || e.Decision.Cost != tc.cost || e.Decision.Reserved != tc.cost || e.Decision.Settled != tc.cost {
				t.Fatalf("logged %s, want cost, reserved and settled %d", e.raw, tc.cost)
			}
			for _, m := range tc.members {
				if !strings.Contains(string(e.Action.Payload), m) {
					t.Fatalf("logged payload %s lacks %s", e.Action.Payload, m)
				}
			}
			spent += tc.cost
		})
	}
	if a := decode[api.Actor](t, ts.call(t, "GET", "/v1/actors/"+agent, cred, nil).must(t, http.StatusOK)); a.Consumed != spent {
		t.Fatalf("the agent consumed %d, the receipts add up to %d", a.Consumed, spent)
	}
}

// TestAttack_EnergyFromNothing: "a human with balance 100 and share 0
// creates an agent with share 2^20." A share given away comes from the
// giver's share: a human holding none cannot give one, and the log is
// unchanged.
func TestAttack_EnergyFromNothing(t *testing.T) {
	ts := newAttackServer(t, nil)
	actor := func(cred, id string) api.Actor {
		return decode[api.Actor](t, ts.call(t, "GET", "/v1/actors/"+id, cred, nil).must(t, http.StatusOK))
	}
	poor := decode[api.Agent](t, ts.call(t, "POST", "/v1/agents", ts.rootCred, `{"kind":"human","name":"poor","purpose":"p","energy":100}`).must(t, http.StatusCreated))
	if a := actor(poor.Credential, poor.ID); a.Share != 0 || a.Balance != 100 {
		t.Fatalf("the human has share %d and balance %d", a.Share, a.Balance)
	}
	// What the human does have, it may give.
	ts.call(t, "POST", "/v1/agents", poor.Credential, `{"name":"funded","purpose":"p","energy":50}`).must(t, http.StatusCreated)
	for _, share := range []uint64{1 << 20, 1} {
		before := ts.logSize(t)
		body := fmt.Sprintf(`{"name":"rich","purpose":"p","share":%d}`, share)
		ts.call(t, "POST", "/v1/agents", poor.Credential, body).refused(t, http.StatusForbidden, "energy")
		ts.unchanged(t, before, fmt.Sprintf("share %d from a human holding none", share))
	}
	if a := actor(poor.Credential, poor.ID); a.Share != 0 || a.Balance != 50 {
		t.Fatalf("the human has share %d and balance %d after the refusals", a.Share, a.Balance)
	}

	// A human given a share of 100 by root gives it on, and then has none.
	rootShare := actor(ts.rootCred, "root").Share
	giver := decode[api.Agent](t, ts.call(t, "POST", "/v1/agents", ts.rootCred, `{"kind":"human","name":"giver","purpose":"p","share":100}`).must(t, http.StatusCreated))
	if got := actor(ts.rootCred, "root").Share; got != rootShare-100 {
		t.Fatalf("root's share went from %d to %d after giving 100", rootShare, got)
	}
	ts.call(t, "POST", "/v1/agents", giver.Credential, `{"name":"a","purpose":"p","share":101}`).refused(t, http.StatusForbidden, "energy")
	a := decode[api.Agent](t, ts.call(t, "POST", "/v1/agents", giver.Credential, `{"name":"a","purpose":"p","share":100}`).must(t, http.StatusCreated))
	if g, c := actor(giver.Credential, giver.ID), actor(giver.Credential, a.ID); g.Share != 0 || c.Share != 100 {
		t.Fatalf("after giving 100: the giver holds %d, the agent %d", g.Share, c.Share)
	}
	before := ts.logSize(t)
	ts.call(t, "POST", "/v1/agents", giver.Credential, `{"name":"b","purpose":"p","share":1}`).refused(t, http.StatusForbidden, "energy")
	ts.unchanged(t, before, "share 1 from a human that gave all of its share")
	// More than all the shares there are is malformed.
	ts.call(t, "POST", "/v1/agents", ts.rootCred, fmt.Sprintf(`{"name":"c","purpose":"p","share":%d}`, 1<<20+1)).refused(t, http.StatusBadRequest)
}

// TestAttack_SelfGrantedSessionRead: "an agent creates a READ_COMMITTED
// session, grants it read of root's session-2 (the owner is never asked),
// and reads `sessions/session-2/secret.md`." The grant is refused (403),
// and so is the read, which is not committed; a read granted by the owner
// of session-2 goes through.
func TestAttack_SelfGrantedSessionRead(t *testing.T) {
	ts := newAttackServer(t, nil)
	agent, cred := ts.newAgent(t, agentSpec{name: "reader", trust: 0.8, energy: 1000, grants: workspace})
	ts.activeSession(t, ts.rootCred, "session-2", "")
	ts.activeSession(t, cred, "mine", `{"isolation":"READ_COMMITTED"}`)
	secret := api.ActionRequest{Type: "observe", Target: "sessions/session-2/secret.md", Session: "mine"}

	// The agent runs its own session.
	ts.call(t, "POST", "/v1/actions", cred, api.ActionRequest{Type: "observe", Target: "sessions/mine/notes.md", Session: "mine"}).must(t, http.StatusOK)
	before := ts.logSize(t)
	ts.call(t, "POST", "/v1/sessions/mine/changes", cred, api.SessionChangeRequest{Op: "grant", Granted: "session-2"}).refused(t, http.StatusForbidden)
	ts.unchanged(t, before, "self-granted read")
	if s := decode[struct {
		Grants []string `json:"grants"`
	}](t, ts.call(t, "GET", "/v1/sessions/mine", cred, nil).must(t, http.StatusOK)); len(s.Grants) != 0 {
		t.Fatalf("session mine has grants %v", s.Grants)
	}
	ts.call(t, "POST", "/v1/actions", cred, secret).refused(t, http.StatusForbidden, "session")
	secret.Session = ""
	ts.call(t, "POST", "/v1/actions", cred, secret).refused(t, http.StatusForbidden, "session")
	ts.noNewActions(t, before, agent)

	// Root, which owns session-2, grants a session of its own the read.
	ts.activeSession(t, ts.rootCred, "shared", `{"isolation":"READ_COMMITTED"}`, cred)
	ts.call(t, "POST", "/v1/sessions/shared/changes", ts.rootCred, api.SessionChangeRequest{Op: "grant", Granted: "session-2"}).must(t, http.StatusOK)
	secret.Session = "shared"
	rc := decode[api.Receipt](t, ts.call(t, "POST", "/v1/actions", cred, secret).must(t, http.StatusOK))
	if e := ts.event(t, rc.Index); e.Kind != "action" || e.Actor != agent || e.Session != "shared" {
		t.Fatalf("granted read logged as %s", e.raw)
	}
	// Still not in the agent's own session, which nobody granted it.
	secret.Session = "mine"
	ts.call(t, "POST", "/v1/actions", cred, secret).refused(t, http.StatusForbidden, "session")
}

// TestAttack_DeclaredPathsNotCleaned: "Declared paths not cleaned at Ring
// 1: `fs_write ["sessions/session-2/x"]` is refused, but
// `x/../sessions/session-2/f`, `./sessions/...` and `agents/../sessions/...`
// passed (also `fs_read`)." Every spelling of a path in another session is
// refused, a path that climbs out of the namespace is a 400, and a path
// that passes is logged cleaned.
func TestAttack_DeclaredPathsNotCleaned(t *testing.T) {
	ts := newAttackServer(t, nil)
	agent, cred := ts.newAgent(t, agentSpec{name: "ring1", trust: 0.97, consensus: true, energy: 10_000, grants: workspace})
	env := ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: agent, Budget: 5000, Grants: workspace}).ID
	if rings := decode[[]struct {
		Agent     string `json:"agent"`
		Effective int    `json:"effective_ring"`
	}](t, ts.call(t, "GET", "/v1/rings", ts.rootCred, nil).must(t, http.StatusOK)); len(rings) != 1 || rings[0].Effective != 1 {
		t.Fatalf("rings %+v, want the agent at Ring 1", rings)
	}
	ts.activeSession(t, ts.rootCred, "session-2", "")
	ts.activeSession(t, cred, "mine", "")
	act := func(session, kind, p string) reply {
		res := &api.Resources{}
		if kind == "fs_read" {
			res.FilesystemRead = []string{p}
		} else {
			res.FilesystemWrite = []string{p}
		}
		return ts.call(t, "POST", "/v1/actions", cred, api.ActionRequest{Type: "mutate", Target: "workspace/x", Envelope: env, Session: session, Resources: res})
	}
	for _, kind := range []string{"fs_write", "fs_read"} {
		// Paths of its own pass, and are logged clean.
		for _, c := range []struct{ session, path, clean string }{
			{"", "workspace/f", "workspace/f"},
			{"", "agents/" + agent + "/f", "agents/" + agent + "/f"},
			{"", "workspace/a/../b", "workspace/b"},
			{"mine", "sessions/mine/f", "sessions/mine/f"},
			{"mine", "./sessions/mine/./g", "sessions/mine/g"},
		} {
			rc := decode[api.Receipt](t, act(c.session, kind, c.path).must(t, http.StatusOK))
			e := ts.event(t, rc.Index)
			got := e.Action.Resources.FilesystemWrite
			if kind == "fs_read" {
				got = e.Action.Resources.FilesystemRead
			}
			if len(got) != 1 || got[0] != c.clean {
				t.Fatalf("%s %q logged as %q, want %q", kind, c.path, got, c.clean)
			}
		}
		before := ts.logSize(t)
		for _, c := range []struct{ session, path string }{
			{"", "sessions/session-2/x"},
			{"", "x/../sessions/session-2/f"},
			{"", "./sessions/session-2/f"},
			{"", "agents/../sessions/session-2/f"},
			{"", "/sessions/session-2/f"},
			{"", "/../sessions/session-2/f"},
			{"", "sessions//session-2/f"},
			{"", "workspace/../sessions/session-2/./f"},
			{"mine", "sessions/mine/../session-2/f"},
			{"mine", "x/../sessions/session-2/f"},
			{"mine", "./sessions/session-2/f"},
			{"mine", "agents/../sessions/session-2/f"},
		} {
			act(c.session, kind, c.path).refused(t, http.StatusForbidden, "resources")
		}
		for _, p := range []string{"../x", "x/../../y", "..", ".", "workspace/../../sessions/session-2/f", "./.."} {
			size := ts.logSize(t)
			act("", kind, p).refused(t, http.StatusBadRequest)
			ts.unchanged(t, size, fmt.Sprintf("%s %q", kind, p))
		}
		ts.noNewActions(t, before, agent)
	}

	// "." names the namespace root and is a 400; "/" names it too, and
	// holds sessions/session-2 as "sessions" (refused above) does.
	t.Run("the namespace root", func(t *testing.T) {
		for _, kind := range []string{"fs_write", "fs_read"} {
			for _, session := range []string{"", "mine"} {
				for _, p := range []string{"/", "/..", "//", "/./"} {
					before := ts.logSize(t)
					r := act(session, kind, p)
					if r.status != http.StatusBadRequest && !(r.status == http.StatusForbidden && r.err.Gate == "resources") {
						t.Errorf("%s %q in session %q: %v, want 400, or 403 from the resources gate", kind, p, session, r)
					}
					ts.noNewActions(t, before, agent)
				}
			}
		}
	})
}

// TestAttack_TerminateUndone: "Terminate can be undone: kill, SIGKILL,
// SIGPOLICY and SIGTRUST only froze; root unfroze a killed agent and it
// acted again." Each now terminates: unfreezing is a 409, the agent cannot
// act, no new envelope brings it back, and an agent it delegated to cannot
// act either. A frozen agent, by contrast, is unfrozen and acts again.
func TestAttack_TerminateUndone(t *testing.T) {
	ts := newAttackServer(t, func(c *kernel.Config) { c.DisableRateLimit = true })
	type victim struct{ id, cred, env, delegate, delegateCred, sub string }
	setup := func(name string) victim {
		var v victim
		v.id, v.cred = ts.newAgent(t, agentSpec{name: name, trust: 0.8, energy: 1000, grants: workspace})
		v.env = ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: v.id, Budget: 500, Grants: workspace}).ID
		ts.mutate(t, v.cred, "workspace/"+v.id+"/before", "").must(t, http.StatusOK)
		v.delegate, v.delegateCred = ts.newAgent(t, agentSpec{name: name + "-delegate", trust: 0.8, energy: 1000, grants: workspace})
		v.sub = ts.issue(t, v.cred, api.EnvelopeRequest{Holder: v.delegate, Parent: v.env, Budget: 100, Grants: workspace}).ID
		ts.mutate(t, v.delegateCred, "workspace/"+v.delegate+"/before", v.sub).must(t, http.StatusOK)
		return v
	}
	status := func(id string) string {
		return decode[api.Actor](t, ts.call(t, "GET", "/v1/actors/"+id, ts.rootCred, nil).must(t, http.StatusOK)).Status
	}

	// Freezing is undone by unfreezing.
	v := setup("frozen")
	ts.call(t, "POST", "/v1/actors/"+v.id+"/status", ts.rootCred, `{"status":"frozen"}`).must(t, http.StatusOK)
	ts.mutate(t, v.cred, "workspace/"+v.id+"/frozen", "").refused(t, http.StatusForbidden, "actor")
	ts.call(t, "POST", "/v1/actors/"+v.id+"/status", ts.rootCred, `{"status":"active"}`).must(t, http.StatusOK)
	ts.mutate(t, v.cred, "workspace/"+v.id+"/unfrozen", "").must(t, http.StatusOK)
	ts.mutate(t, v.delegateCred, "workspace/"+v.delegate+"/unfrozen", v.sub).must(t, http.StatusOK)

	for _, tc := range []struct {
		name       string
		path, body string
		revokes    bool
	}{
		{"kill", "/kill", `{"reason":"manual"}`, true},
		{"SIGKILL", "/signal", `{"signal":"SIGKILL"}`, true},
		{"SIGPOLICY", "/signal", `{"signal":"SIGPOLICY"}`, true},
		{"SIGTRUST", "/signal", `{"signal":"SIGTRUST"}`, true},
		{"SIGTERM", "/signal", `{"signal":"SIGTERM"}`, true},
		{"status terminated", "", `{"status":"terminated"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := setup("victim")
			id, cred, env := v.id, v.cred, v.env
			if tc.path == "" {
				ts.call(t, "POST", "/v1/actors/"+id+"/status", ts.rootCred, tc.body).must(t, http.StatusOK)
			} else {
				ts.call(t, "POST", "/v1/agents/"+id+tc.path, ts.rootCred, tc.body).must(t, http.StatusOK)
			}
			if s := status(id); s != "terminated" {
				t.Fatalf("after %s the agent is %q", tc.name, s)
			}
			before := ts.logSize(t)
			for _, s := range []string{"active", "frozen", "terminated"} {
				ts.call(t, "POST", "/v1/actors/"+id+"/status", ts.rootCred, `{"status":"`+s+`"}`).refused(t, http.StatusConflict)
			}
			ts.call(t, "POST", "/v1/agents/"+id+"/signal", ts.rootCred, `{"signal":"SIGCONT"}`).refused(t, http.StatusConflict)
			ts.call(t, "POST", "/v1/envelopes", ts.rootCred, api.EnvelopeRequest{Holder: id, Budget: 100, Grants: workspace}).refused(t, http.StatusForbidden)
			ts.unchanged(t, before, "undoing a termination")
			if s := status(id); s != "terminated" {
				t.Fatalf("the agent is %q", s)
			}
			ts.mutate(t, cred, "workspace/"+id+"/after", "").refused(t, http.StatusForbidden, "actor")
			ts.mutate(t, v.delegateCred, "workspace/"+v.delegate+"/after", v.sub).refused(t, http.StatusForbidden, "envelope")
			ts.noNewActions(t, before, id)
			ts.noNewActions(t, before, v.delegate)
			e := decode[api.Envelope](t, ts.call(t, "GET", "/v1/envelopes/"+env, ts.rootCred, nil).must(t, http.StatusOK))
			if tc.revokes && !e.Revoked {
				t.Fatalf("envelope %s is not revoked after %s", env, tc.name)
			}
		})
	}
}

// TestAttack_TimesComparedAsText: "a sub-envelope with expiry
// `2026-12-01T00:00:00.5Z` under a parent expiring `2026-12-01T00:00:00Z`
// must be refused." Expiries are compared as instants: a child may not
// outlast its parent, however the times are written. The dates are a month
// after the server's clock, at a whole second.
func TestAttack_TimesComparedAsText(t *testing.T) {
	ts := newAttackServer(t, nil)
	parent := time.Now().UTC().Add(30 * 24 * time.Hour).Truncate(time.Second)
	whole := parent.Format(time.RFC3339) // "…T12:34:56Z"
	if !strings.HasSuffix(whole, "Z") || strings.Contains(whole, ".") {
		t.Fatalf("parent expiry %q", whole)
	}
	holder, holderCred := ts.newAgent(t, agentSpec{name: "holder", energy: 100, grants: workspace})
	child, _ := ts.newAgent(t, agentSpec{name: "child", energy: 100})
	env := ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: holder, Budget: 1000, Grants: workspace, Expires: whole})
	if env.Expires == "" {
		t.Fatalf("the parent envelope has no expiry: %+v", env)
	}
	delegate := func(expires string) reply {
		return ts.call(t, "POST", "/v1/envelopes", holderCred, api.EnvelopeRequest{Holder: child, Parent: env.ID, Budget: 1, Grants: workspace, Expires: expires})
	}
	plus2 := time.FixedZone("+02:00", 2*3600)
	minus2 := time.FixedZone("-02:00", -2*3600)
	for _, c := range []struct {
		name, expires string
		ok            bool
	}{
		{"the parent's instant", whole, true},
		{"half a second before", parent.Add(-500 * time.Millisecond).Format(time.RFC3339Nano), true},
		{"an hour before, written later in +02:00", parent.Add(-time.Hour).In(plus2).Format(time.RFC3339), true},
		{"the parent's instant in +02:00", parent.In(plus2).Format(time.RFC3339), true},
		{"half a second after", strings.TrimSuffix(whole, "Z") + ".5Z", false},
		{"a nanosecond after", strings.TrimSuffix(whole, "Z") + ".000000001Z", false},
		{"an hour after, written earlier in -02:00", parent.Add(time.Hour).In(minus2).Format(time.RFC3339), false},
		{"a second after in -02:00", parent.Add(time.Second).In(minus2).Format(time.RFC3339), false},
		{"no expiry", "", false},
	} {
		before := ts.logSize(t)
		r := delegate(c.expires)
		if c.ok {
			r.must(t, http.StatusCreated)
			continue
		}
		r.refused(t, http.StatusForbidden, "envelope")
		ts.unchanged(t, before, c.name)
	}
}

// TestAttack_AgentAnswersHold: only humans answer holds, and only root, the
// agent's creator or the human who issued the root of its envelope chain.
// The held agent itself, the agent that delegated its envelope, another
// agent, and a human who oversees none of them, answering in either form
// (POST /v1/holds/<id>/approve|reject or mutate ledger/hold/<id>), are
// refused; the hold stays pending and the log unchanged, and root's
// approval then commits the action.
func TestAttack_AgentAnswersHold(t *testing.T) {
	ts := newAttackServer(t, nil)
	delegator, delegatorCred := ts.newAgent(t, agentSpec{name: "delegator", trust: 0.8, energy: 1000, grants: workspace})
	env := ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: delegator, Budget: 500, Grants: workspace,
		HoldOn: []api.Grant{{Pattern: "workspace/release/**", Actions: []string{"mutate"}}}}).ID
	agent, cred := ts.newAgent(t, agentSpec{name: "held", trust: 0.8, energy: 1000, grants: workspace})
	sub := ts.issue(t, delegatorCred, api.EnvelopeRequest{Holder: agent, Parent: env, Budget: 200, Grants: workspace}).ID
	_, otherCred := ts.newAgent(t, agentSpec{name: "other", trust: 0.8, energy: 1000, grants: workspace})
	stranger := decode[api.Agent](t, ts.call(t, "POST", "/v1/agents", ts.rootCred, `{"kind":"human","name":"stranger","purpose":"p"}`).must(t, http.StatusCreated))
	rc := decode[api.Receipt](t, ts.mutate(t, cred, "workspace/release/v1", sub).must(t, http.StatusAccepted))
	if rc.Status != "held" || rc.HoldID == "" {
		t.Fatalf("receipt %+v", rc)
	}
	before := ts.logSize(t)
	for _, by := range []struct{ name, cred string }{
		{"the held agent", cred},
		{"the agent that delegated its envelope", delegatorCred},
		{"another agent", otherCred},
		{"a human who oversees none of them", stranger.Credential},
	} {
		for _, decision := range []string{"approve", "reject"} {
			ts.call(t, "POST", "/v1/holds/"+rc.HoldID+"/"+decision, by.cred, `{"reason":"mine"}`).refused(t, http.StatusForbidden)
			ts.call(t, "POST", "/v1/actions", by.cred, `{"type":"mutate","target":"ledger/hold/`+rc.HoldID+`","payload":{"decision":"`+decision+`"}}`).refused(t, http.StatusForbidden)
		}
		ts.unchanged(t, before, by.name+" answering a hold")
	}
	holds := decode[[]api.Hold](t, ts.call(t, "GET", "/v1/holds?status=pending", ts.rootCred, nil).must(t, http.StatusOK))
	if len(holds) != 1 || holds[0].ID != rc.HoldID {
		t.Fatalf("pending holds %+v", holds)
	}
	ok := decode[api.Receipt](t, ts.call(t, "POST", "/v1/holds/"+rc.HoldID+"/approve", ts.rootCred, `{}`).must(t, http.StatusOK))
	if e := ts.event(t, ok.Index); e.Kind != "action" || e.Actor != agent || e.Hold == nil || e.Hold.ID != rc.HoldID {
		t.Fatalf("approval logged as %s", e.raw)
	}
}

// TestAttack_DelegateOfStoppedDelegator: an agent acting under an envelope
// another agent delegated cannot act while that agent is frozen,
// quarantined or stopped, and acts again once it is unfrozen, released or
// continued.
func TestAttack_DelegateOfStoppedDelegator(t *testing.T) {
	ts := newAttackServer(t, func(c *kernel.Config) { c.DisableRateLimit = true })
	delegator, delegatorCred := ts.newAgent(t, agentSpec{name: "delegator", trust: 0.8, energy: 1000, grants: workspace})
	env := ts.issue(t, ts.rootCred, api.EnvelopeRequest{Holder: delegator, Budget: 500, Grants: workspace}).ID
	delegate, cred := ts.newAgent(t, agentSpec{name: "delegate", trust: 0.8, energy: 1000, grants: workspace})
	sub := ts.issue(t, delegatorCred, api.EnvelopeRequest{Holder: delegate, Parent: env, Budget: 200, Grants: workspace}).ID
	n := 0
	act := func() reply {
		n++
		return ts.mutate(t, cred, fmt.Sprintf("workspace/%s/%d", delegate, n), sub)
	}
	act().must(t, http.StatusOK)
	for _, c := range []struct {
		name, gate         string
		stop, resume, body string
		resumeBody         string
	}{
		{"frozen", "envelope", "/v1/actors/" + delegator + "/status", "/v1/actors/" + delegator + "/status", `{"status":"frozen"}`, `{"status":"active"}`},
		{"quarantined", "quarantine", "/v1/agents/" + delegator + "/quarantine", "/v1/agents/" + delegator + "/release", `{"reason":"manual"}`, `{}`},
		{"stopped", "envelope", "/v1/agents/" + delegator + "/signal", "/v1/agents/" + delegator + "/signal", `{"signal":"SIGSTOP"}`, `{"signal":"SIGCONT"}`},
	} {
		ts.call(t, "POST", c.stop, ts.rootCred, c.body).must(t, http.StatusOK)
		before := ts.logSize(t)
		act().refused(t, http.StatusForbidden, c.gate)
		ts.noNewActions(t, before, delegate)
		ts.call(t, "POST", c.resume, ts.rootCred, c.resumeBody).must(t, http.StatusOK)
		act().must(t, http.StatusOK)
	}
}
