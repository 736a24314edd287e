package kernel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// clock is a settable clock for tests of expiry and hold timeouts.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type govKernel struct {
	*Kernel
	t     testing.TB
	root  *Actor
	clock *clock
}

func openGov(t testing.TB, mutate ...func(*Config)) *govKernel {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	c := &clock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	cfg.Now = c.Now
	cfg.Energy.Genesis = 1 << 40
	for _, m := range mutate {
		m(&cfg)
	}
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &govKernel{Kernel: k, t: t, root: rootOf(t, k), clock: c}
	t.Cleanup(func() {
		k.closeMu.Lock()
		closed := k.closed
		k.closeMu.Unlock()
		if closed {
			return // the test closed it, and checked what it needed
		}
		if diff, err := k.stateMatchesReplay(context.Background()); err != nil || len(diff) > 0 {
			t.Errorf("state differs from a replay of the log at %v (%v)", diff, err)
		}
		k.Close()
	})
	return g
}

func grants(spec ...string) []event.Grant {
	var out []event.Grant
	for _, s := range spec {
		pattern, acts, _ := strings.Cut(s, ":")
		g := event.Grant{Pattern: pattern}
		for _, a := range strings.Split(acts, ",") {
			g.Actions = append(g.Actions, event.ActionType(a))
		}
		out = append(out, g)
	}
	return out
}

// agent creates an agent with grants and energy, and returns it
// authenticated.
func (g *govKernel) agent(energy uint64, spec ...string) (*Actor, string) {
	g.t.Helper()
	na, err := g.CreateAgent(context.Background(), g.root, ActorRequest{Name: "a", Purpose: "test", Energy: energy, Grants: grants(spec...), Trust: ptr(0.8)})
	if err != nil {
		g.t.Fatal(err)
	}
	a, err := g.Authenticate(na.Credential)
	if err != nil {
		g.t.Fatal(err)
	}
	return a, na.Credential
}

func (g *govKernel) envelope(issuer *Actor, req EnvelopeRequest) *Envelope {
	g.t.Helper()
	v, _, err := g.IssueEnvelope(context.Background(), issuer, req)
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

func (g *govKernel) submit(a *Actor, t event.ActionType, target string) (*Receipt, error) {
	return g.Submit(context.Background(), a, ActionRequest{Type: t, Target: target})
}

func (g *govKernel) size() uint64 {
	s, err := g.log.Size(context.Background())
	if err != nil {
		g.t.Fatal(err)
	}
	return s
}

func (g *govKernel) balance(id string) (balance, reserved uint64) {
	a, err := g.Actor(id)
	if err != nil {
		g.t.Fatal(err)
	}
	return a.Balance, a.Reserved
}

func (g *govKernel) kindAt(index uint64) event.Kind { return g.eventAt(index).Kind }

// eventAt is the event logged at index.
func (g *govKernel) eventAt(index uint64) *event.Event {
	g.t.Helper()
	entry, err := g.Entry(context.Background(), index)
	if err != nil {
		g.t.Fatal(err)
	}
	ev, err := event.Parse(entry)
	if err != nil {
		g.t.Fatal(err)
	}
	return ev
}

func denialOf(t testing.TB, err error) *Denial {
	t.Helper()
	var d *Denial
	if !errors.As(err, &d) {
		t.Fatalf("error %v is not a denial", err)
	}
	return d
}

// INV-4 (§6.2): an agent limited to workspace/docs/* (mutate only), the
// seven cases, and more. A denial appends one zero-cost action.denied event
// and changes no balance; with StrictDenials it appends nothing.
func TestINV4_BoundaryEnforcement(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			g := openGov(t, func(c *Config) { c.StrictDenials = strict })
			agent, _ := g.agent(1_000_000, "workspace/docs/*:mutate")
			g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 500_000, Grants: grants("workspace/docs/*:mutate")})
			exec := fmt.Sprintf(`{"input_oid":"sha256:%[1]s","output_oid":"sha256:%[1]s","artifact_hash":"sha256:%[1]s","exit_code":0}`, strings.Repeat("a", 64))
			for _, tc := range []struct {
				name   string
				actor  *Actor
				t      event.ActionType
				target string
				gate   string // "" = allowed
			}{
				{"a observe exemption", agent, event.Observe, "system/anything", ""},
				{"b in bounds", agent, event.Mutate, "workspace/docs/readme", ""},
				{"c out of bounds", agent, event.Mutate, "workspace/code/main.rs", GateBoundary},
				{"d disallowed type", agent, event.Execute, "workspace/docs/script", GateBoundary},
				{"e privileged system/", agent, event.Create, "system/config", GateBoundary},
				{"f privileged ledger/", agent, event.Create, "ledger/something", GateBoundary},
				{"g root override", g.root, event.Mutate, "workspace/code/main.rs", ""},
				{"* is one segment", agent, event.Mutate, "workspace/docs/a/b", GateBoundary},
				{"prefix trick", agent, event.Mutate, "workspace/docsx/a", GateBoundary},
				{"root writes system/", g.root, event.Create, "system/config", ""},
			} {
				before := g.size()
				bal, _ := g.balance(tc.actor.ID)
				req := ActionRequest{Type: tc.t, Target: tc.target}
				if tc.t == event.Execute {
					req.Payload = []byte(exec)
				}
				_, err := g.Submit(context.Background(), tc.actor, req)
				after := g.size()
				if tc.gate == "" {
					if err != nil || after != before+1 {
						t.Fatalf("%s: %v (log %d -> %d)", tc.name, err, before, after)
					}
					continue
				}
				d := denialOf(t, err)
				if d.Gate != tc.gate || !errors.Is(err, ErrForbidden) {
					t.Fatalf("%s: %v, want a %s denial", tc.name, err, tc.gate)
				}
				if bal2, _ := g.balance(tc.actor.ID); bal2 != bal {
					t.Fatalf("%s: a denial moved the balance %d -> %d", tc.name, bal, bal2)
				}
				switch {
				case strict && (after != before || d.Recorded):
					t.Fatalf("%s: strict mode appended %d entries", tc.name, after-before)
				case !strict && (after != before+1 || !d.Recorded || g.kindAt(d.Index) != event.KindActionDenied):
					t.Fatalf("%s: denial not recorded as one action.denied event (log %d -> %d, %+v)", tc.name, before, after, d)
				}
			}
			// An agent granted ** is still not root.
			wide, _ := g.agent(100, "**:create")
			g.envelope(g.root, EnvelopeRequest{Holder: wide.ID, Budget: 100, Grants: grants("**:create")})
			if _, err := g.submit(wide, event.Create, "system/x"); denialOf(t, err).Gate != GateBoundary {
				t.Fatalf("agent with ** wrote system/: %v", err)
			}
		})
	}
}

// INV-5 (§6.2) part 1: budget 100 and mutate 15: 100 → 85 → … → 10, the
// seventh is refused for energy and the balance stays 10.
func TestINV5_BudgetExhaustion(t *testing.T) {
	g := openGov(t)
	agent, _ := g.agent(100, "workspace/**:mutate")
	v := g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 100, Grants: grants("workspace/**:mutate")})
	for i, want := range []uint64{85, 70, 55, 40, 25, 10} {
		if _, err := g.submit(agent, event.Mutate, fmt.Sprintf("workspace/e/%d", i)); err != nil {
			t.Fatalf("mutate %d: %v", i+1, err)
		}
		if b, _ := g.balance(agent.ID); b != want {
			t.Fatalf("after mutate %d balance %d, want %d", i+1, b, want)
		}
	}
	_, err := g.submit(agent, event.Mutate, "workspace/e/6")
	if d := denialOf(t, err); d.Gate != GateEnergy || !errors.Is(err, ErrInsufficientEnergy) {
		t.Fatalf("seventh mutate: %v", err)
	}
	if b, _ := g.balance(agent.ID); b != 10 {
		t.Fatalf("balance after refusal %d, want 10", b)
	}
	if env, _ := g.Envelope(v.ID); env.Consumed != 90 || env.Reserved != 0 {
		t.Fatalf("envelope %+v", env)
	}
	// Execute with output_bytes 1024 costs 25 + 4 = 29.
	g2 := openGov(t)
	ex, _ := g2.agent(100, "tools/*:execute")
	g2.envelope(g2.root, EnvelopeRequest{Holder: ex.ID, Budget: 100, Grants: grants("tools/*:execute")})
	payload := fmt.Sprintf(`{"input_oid":"sha256:%[1]s","output_oid":"sha256:%[1]s","artifact_hash":"sha256:%[1]s","exit_code":0,"output_bytes":1024}`, strings.Repeat("b", 64))
	for i, want := range []uint64{71, 42, 13} {
		r, err := g2.Submit(context.Background(), ex, ActionRequest{Type: event.Execute, Target: "tools/run", Payload: []byte(payload)})
		if err != nil || r.Cost != 29 {
			t.Fatalf("execute %d: %v %+v", i+1, err, r)
		}
		if b, _ := g2.balance(ex.ID); b != want {
			t.Fatalf("after execute %d balance %d, want %d", i+1, b, want)
		}
	}
	if _, err := g2.Submit(context.Background(), ex, ActionRequest{Type: event.Execute, Target: "tools/run", Payload: []byte(payload)}); !errors.Is(err, ErrInsufficientEnergy) {
		t.Fatalf("fourth execute: %v", err)
	}
}

// INV-5 part 2: a hold reserves 15; reject settles ⌈20% × 15⌉ = 3: 1000 → 997.
func TestINV5_HoldRejectCommitment(t *testing.T) {
	g := openGov(t)
	agent, _ := g.agent(1000, "workspace/**:mutate")
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 1000, Grants: grants("workspace/**:mutate"), HoldOn: grants("workspace/gated/*:mutate")})
	r, err := g.submit(agent, event.Mutate, "workspace/gated/file")
	if err != nil || r.Status != StatusHeld || r.HoldID == "" || g.kindAt(r.Index) != event.KindHoldRequested {
		t.Fatalf("held mutate: %v %+v", err, r)
	}
	if b, res := g.balance(agent.ID); b != 1000 || res != 15 {
		t.Fatalf("while held: balance %d reserved %d", b, res)
	}
	// Non-held actions go on meanwhile (Def. 4.20).
	if _, err := g.submit(agent, event.Mutate, "workspace/free"); err != nil {
		t.Fatal(err)
	}
	ans, err := g.AnswerHold(context.Background(), g.root, r.HoldID, event.HoldReject, "not now")
	if err != nil || ans.Cost != 3 || g.kindAt(ans.Index) != event.KindHoldAnswered {
		t.Fatalf("reject: %v %+v", err, ans)
	}
	if b, res := g.balance(agent.ID); b != 1000-15-3 || res != 0 {
		t.Fatalf("after reject: balance %d reserved %d, want 982 and 0", b, res)
	}
	if _, err := g.AnswerHold(context.Background(), g.root, r.HoldID, event.HoldApprove, ""); !errors.Is(err, ErrConflict) {
		t.Fatalf("second answer: %v", err)
	}
}

func TestHoldApproveRerunsThePipeline(t *testing.T) {
	g := openGov(t)
	agent, _ := g.agent(1000, "workspace/**:mutate")
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 1000, Grants: grants("workspace/**:mutate"), HoldOn: grants("workspace/gated/**:mutate")})
	held := func() *Receipt {
		r, err := g.Submit(context.Background(), agent, ActionRequest{Type: event.Mutate, Target: "workspace/gated/x", Payload: []byte(`{"v":1}`)})
		if err != nil || r.Status != StatusHeld {
			t.Fatalf("held: %v %+v", err, r)
		}
		return r
	}
	r := held()
	// The paper's form of an answer: mutate ledger/hold/<id>, by a human.
	ans, err := g.Submit(context.Background(), g.root, ActionRequest{Type: event.Mutate, Target: "ledger/hold/" + r.HoldID, Payload: []byte(`{"decision":"approve"}`)})
	if err != nil || ans.Status != StatusCommitted || ans.Actor != agent.ID || ans.Cost != 15 {
		t.Fatalf("approve: %v %+v", err, ans)
	}
	entry, _ := g.Entry(context.Background(), ans.Index)
	ev, _ := event.Parse(entry)
	if ev.Kind != event.KindAction || ev.Hold == nil || ev.Hold.ID != r.HoldID || ev.Hold.AnsweredBy != RootID || string(ev.Action.Payload) != `{"v":1}` {
		t.Fatalf("approved action event %s", entry)
	}
	if b, res := g.balance(agent.ID); b != 985 || res != 0 {
		t.Fatalf("after approve: %d %d", b, res)
	}
	// Approval re-checks: the agent was frozen while the hold waited, so
	// the approval is refused and costs the commitment; the answer is the
	// refusal, recorded where the hold ended.
	r2 := held()
	if _, err := g.SetStatus(context.Background(), g.root, agent.ID, event.StatusFrozen, "review"); err != nil {
		t.Fatal(err)
	}
	ans2, err := g.AnswerHold(context.Background(), g.root, r2.HoldID, event.HoldApprove, "")
	var d *Denial
	if !errors.As(err, &d) || !errors.Is(err, ErrForbidden) || d.Gate != GateActor || !d.Recorded || g.kindAt(d.Index) != event.KindHoldAnswered || ans2 != nil {
		t.Fatalf("approve of a frozen agent's hold: %v %+v", err, ans2)
	}
	if b, res := g.balance(agent.ID); b != 982 || res != 0 {
		t.Fatalf("after the refused approval: balance %d reserved %d, want the commitment 3 charged", b, res)
	}
	g.mu.Lock()
	status := g.ledger.Holds[r2.HoldID].Status
	g.mu.Unlock()
	if status != ledger.HoldFailed {
		t.Fatalf("hold status %s", status)
	}
}

func TestHoldTimeout(t *testing.T) {
	g := openGov(t)
	agent, _ := g.agent(100, "workspace/**:mutate")
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 100, Grants: grants("workspace/**:mutate"), HoldOn: grants("**:mutate"), HoldTimeoutSecs: 60})
	r, err := g.submit(agent, event.Mutate, "workspace/x")
	if err != nil || r.Status != StatusHeld {
		t.Fatal(err)
	}
	g.timeOutHolds(context.Background())
	if _, res := g.balance(agent.ID); res != 15 {
		t.Fatal("timed out before its deadline")
	}
	g.clock.advance(61 * time.Second)
	g.timeOutHolds(context.Background())
	if b, res := g.balance(agent.ID); b != 97 || res != 0 {
		t.Fatalf("after timeout: %d %d", b, res)
	}
	if g.kindAt(g.size()-1) != event.KindHoldAnswered {
		t.Fatal("no hold.answered for the timeout")
	}
}

func TestAttacksThatMustFail(t *testing.T) {
	ctx := context.Background()
	g := openGov(t)
	agent, _ := g.agent(1000, "workspace/**:create,mutate")
	other, _ := g.agent(1000, "workspace/**:create,mutate")
	parent := g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 100, Grants: grants("workspace/*:mutate"), HoldOn: grants("workspace/held:mutate")})

	t.Run("wrong credential", func(t *testing.T) {
		if _, err := g.Authenticate("annal_" + strings.Repeat("A", 43)); !errors.Is(err, ErrUnauthenticated) {
			t.Fatal(err)
		}
	})
	t.Run("agent creates an agent", func(t *testing.T) {
		if _, err := g.CreateAgent(ctx, agent, ActorRequest{Name: "x", Purpose: "y"}); !errors.Is(err, ErrForbidden) {
			t.Fatal(err)
		}
	})
	t.Run("agent answers a hold", func(t *testing.T) {
		r, err := g.submit(agent, event.Mutate, "workspace/held")
		if err != nil || r.Status != StatusHeld {
			t.Fatal(err)
		}
		if _, err := g.AnswerHold(ctx, agent, r.HoldID, event.HoldApprove, ""); !errors.Is(err, ErrForbidden) {
			t.Fatalf("agent approved its own hold: %v", err)
		}
		if _, err := g.Submit(ctx, agent, ActionRequest{Type: event.Mutate, Target: "ledger/hold/" + r.HoldID, Payload: []byte(`{"decision":"approve"}`)}); !errors.Is(err, ErrForbidden) {
			t.Fatalf("agent approved through ledger/hold: %v", err)
		}
		if _, err := g.AnswerHold(ctx, g.root, r.HoldID, event.HoldReject, ""); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("control fields in a payload", func(t *testing.T) {
		for _, p := range []string{`{"_hold_approved":true}`, `{"_hold_reserved_cost":0}`, `{"_annal":1}`} {
			before := g.size()
			_, err := g.Submit(ctx, agent, ActionRequest{Type: event.Mutate, Target: "workspace/held", Payload: []byte(p)})
			if !errors.Is(err, ErrInvalid) || g.size() != before {
				t.Fatalf("%s: %v", p, err)
			}
		}
	})
	t.Run("delegation wider than the issuer's", func(t *testing.T) {
		for _, req := range []EnvelopeRequest{
			{Holder: other.ID, Parent: parent.ID, Budget: 10, Grants: grants("workspace/**:mutate")}, // ** is wider than *
			{Holder: other.ID, Parent: parent.ID, Budget: 10, Grants: grants("workspace/*:create")},  // a type the parent lacks
			{Holder: other.ID, Parent: parent.ID, Budget: 101, Grants: grants("workspace/*:mutate")}, // more than its budget
		} {
			if _, _, err := g.IssueEnvelope(ctx, agent, req); err == nil {
				t.Fatalf("delegated %+v", req)
			}
		}
		child := g.envelope(agent, EnvelopeRequest{Holder: other.ID, Parent: parent.ID, Budget: 50, Grants: grants("workspace/a*:mutate")})
		// The parent's hold rules bind the child's holder too.
		if r, err := g.Submit(ctx, other, ActionRequest{Type: event.Mutate, Target: "workspace/held", Envelope: child.ID}); err == nil && r.Status != StatusHeld {
			t.Fatalf("delegation dodged a hold: %+v", r)
		}
		if _, err := g.Submit(ctx, other, ActionRequest{Type: event.Mutate, Target: "workspace/abc", Envelope: child.ID}); err != nil {
			t.Fatal(err)
		}
		// Revoking the parent stops the child.
		if _, err := g.RevokeEnvelope(ctx, g.root, parent.ID, "done"); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Submit(ctx, other, ActionRequest{Type: event.Mutate, Target: "workspace/abc", Envelope: child.ID}); denialOf(t, err).Gate != GateEnvelope {
			t.Fatalf("child of a revoked envelope acted: %v", err)
		}
	})
	t.Run("targets that trick matchers", func(t *testing.T) {
		for _, target := range []string{"workspace/../system/x", "workspace//x", "workspace/./x", "/workspace/x", "workspace/x/", "workspace\\x", "workspace/\x00"} {
			if _, err := g.submit(g.root, event.Mutate, target); !errors.Is(err, ErrInvalid) {
				t.Fatalf("target %q: %v", target, err)
			}
		}
	})
}

func TestFrozenTerminatedExpiredActorsCannotAct(t *testing.T) {
	ctx := context.Background()
	g := openGov(t)
	na, err := g.CreateAgent(ctx, g.root, ActorRequest{Name: "e", Purpose: "p", Energy: 100, Grants: grants("workspace/**:mutate"), Trust: ptr(0.8),
		Expires: g.clock.Now().Add(time.Hour).Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := g.Authenticate(na.Credential)
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 100, Grants: grants("workspace/**:mutate")})
	if _, err := g.submit(agent, event.Mutate, "workspace/a"); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ status, want string }{{event.StatusFrozen, "frozen"}, {event.StatusActive, ""}, {event.StatusTerminated, "terminated"}} {
		if _, err := g.SetStatus(ctx, g.root, agent.ID, step.status, ""); err != nil {
			t.Fatal(err)
		}
		_, err := g.submit(agent, event.Mutate, "workspace/a")
		if step.want == "" {
			if err != nil {
				t.Fatalf("after unfreeze: %v", err)
			}
			continue
		}
		if d := denialOf(t, err); d.Gate != GateActor || !strings.Contains(err.Error(), step.want) {
			t.Fatalf("%s agent acted: %v", step.want, err)
		}
	}
	if _, err := g.SetStatus(ctx, g.root, agent.ID, event.StatusActive, ""); !errors.Is(err, ErrConflict) {
		t.Fatalf("unterminated: %v", err)
	}
	if _, err := g.SetStatus(ctx, g.root, RootID, event.StatusFrozen, ""); !errors.Is(err, ErrForbidden) {
		t.Fatalf("froze a human: %v", err)
	}
	// Expiry.
	a2, _ := g.agent(100, "workspace/**:mutate")
	na3, err := g.CreateAgent(ctx, g.root, ActorRequest{Name: "x", Purpose: "p", Energy: 50, Grants: grants("workspace/**:mutate"), Trust: ptr(0.8), Expires: g.clock.Now().Add(time.Minute).Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	a3, _ := g.Authenticate(na3.Credential)
	g.envelope(g.root, EnvelopeRequest{Holder: a3.ID, Budget: 50, Grants: grants("workspace/**:mutate")})
	g.envelope(g.root, EnvelopeRequest{Holder: a2.ID, Budget: 50, Grants: grants("workspace/**:mutate"), Expires: g.clock.Now().Add(time.Minute).Format(time.RFC3339)})
	g.clock.advance(2 * time.Minute)
	if _, err := g.submit(a3, event.Mutate, "workspace/a"); denialOf(t, err).Gate != GateActor {
		t.Fatalf("expired agent acted: %v", err)
	}
	if _, err := g.submit(a2, event.Mutate, "workspace/a"); denialOf(t, err).Gate != GateEnvelope {
		t.Fatalf("acted under an expired envelope: %v", err)
	}
}

// Spending past a budget with concurrent requests: budget 100, cost 15,
// 64 racing mutates — exactly six commit, and consumed + reserved never
// exceeds the budget.
func TestConcurrentSpendingStopsAtTheBudget(t *testing.T) {
	g := openGov(t)
	agent, _ := g.agent(10_000, "workspace/**:mutate")
	v := g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 100, Grants: grants("workspace/**:mutate")})
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := g.submit(agent, event.Mutate, fmt.Sprintf("workspace/%d", i))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrInsufficientEnergy):
				refused.Add(1)
			default:
				t.Errorf("mutate %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	env, _ := g.Envelope(v.ID)
	if ok.Load() != 6 || refused.Load() != 58 || env.Consumed != 90 {
		t.Fatalf("%d committed, %d refused, consumed %d; want 6, 58, 90", ok.Load(), refused.Load(), env.Consumed)
	}
}

// INV-2 (§6.2): 5 observes and 5 creates by root, 5 mutates by an agent, 5
// out-of-bounds mutates: 15 actions recorded, 5 refused (as denial events
// by default); a hold records its request and its answer.
func TestINV2_Completeness(t *testing.T) {
	g := openGov(t)
	agent, _ := g.agent(1_000_000, "workspace/**:create,mutate,execute")
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 500_000, Grants: grants("workspace/**:create,mutate,execute"), HoldOn: grants("workspace/sensitive/*:mutate")})
	start := g.size()
	var committed, denied int
	for i := range 5 {
		for _, c := range []struct {
			a      *Actor
			t      event.ActionType
			target string
		}{{g.root, event.Observe, "workspace/obs/%d"}, {g.root, event.Create, "workspace/create/%d"}, {agent, event.Mutate, "workspace/allowed/%d"}, {agent, event.Mutate, "system/forbidden/%d"}} {
			_, err := g.submit(c.a, c.t, fmt.Sprintf(c.target, i))
			if err == nil {
				committed++
			} else {
				denied++
			}
		}
	}
	if committed != 15 || denied != 5 || g.size() != start+20 {
		t.Fatalf("committed %d denied %d, log grew by %d", committed, denied, g.size()-start)
	}
	actions, denials := 0, 0
	for i := start; i < g.size(); i++ {
		switch g.kindAt(i) {
		case event.KindAction:
			actions++
		case event.KindActionDenied:
			denials++
		}
	}
	if actions != 15 || denials != 5 {
		t.Fatalf("log has %d actions and %d denials", actions, denials)
	}
	r, err := g.submit(agent, event.Mutate, "workspace/sensitive/data")
	if err != nil || r.Status != StatusHeld {
		t.Fatal(err)
	}
	ans, err := g.AnswerHold(context.Background(), g.root, r.HoldID, event.HoldReject, "")
	if err != nil || g.kindAt(r.Index) != event.KindHoldRequested || g.kindAt(ans.Index) != event.KindHoldAnswered {
		t.Fatalf("hold not recorded: %v", err)
	}
}

// Only root and a human's own agents: a second human cannot answer root's
// agent's holds nor freeze it, and cannot issue it envelopes.
func TestAuthorityOfHumans(t *testing.T) {
	ctx := context.Background()
	g := openGov(t)
	nh, err := g.CreateAgent(ctx, g.root, ActorRequest{Kind: event.Human, Name: "alice", Purpose: "reviewer", Energy: 100, Grants: grants("workspace/**:*")})
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := g.Authenticate(nh.Credential)
	if _, err := g.CreateAgent(ctx, alice, ActorRequest{Kind: event.Human, Name: "bob", Purpose: "x"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a non-root human created a human: %v", err)
	}
	if _, err := g.CreateAgent(ctx, alice, ActorRequest{Name: "wide", Purpose: "x", Grants: grants("**:mutate")}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("alice gave an agent more than she has: %v", err)
	}
	agent, _ := g.agent(100, "workspace/**:mutate")
	if _, _, err := g.IssueEnvelope(ctx, alice, EnvelopeRequest{Holder: agent.ID, Budget: 10, Grants: grants("workspace/*:mutate")}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("alice issued to root's agent: %v", err)
	}
	if _, err := g.SetStatus(ctx, alice, agent.ID, event.StatusFrozen, ""); !errors.Is(err, ErrForbidden) {
		t.Fatalf("alice froze root's agent: %v", err)
	}
}

func TestEnergyProductionIsLoggedAndShared(t *testing.T) {
	g := openGov(t)
	// Root holds every share at genesis and gives three quarters away.
	_, err := g.CreateAgent(context.Background(), g.root, ActorRequest{Name: "s", Purpose: "p", Share: ptr(uint64(3 * MaxShare / 4))})
	if err != nil {
		t.Fatal(err)
	}
	rootBefore, _ := g.balance(RootID)
	g.produce(context.Background(), false) // one tick, kernel busy since genesis
	entry, _ := g.Entry(context.Background(), g.size()-1)
	ev, err := event.Parse(entry)
	if err != nil || ev.Kind != event.KindEnergyProduced || ev.Production.Ticks != 1 {
		t.Fatalf("last entry %s (%v)", entry, err)
	}
	var total uint64
	for _, c := range ev.Production.Credits {
		total += c.Amount
	}
	if total != event.DefaultEnergy.PerTick {
		t.Fatalf("credits add up to %d, want %d", total, event.DefaultEnergy.PerTick)
	}
	// Shares 1/4 (root) and 3/4: 25 and 75.
	if b, _ := g.balance(RootID); b != rootBefore+25 {
		t.Fatalf("root got %d, want 25", b-rootBefore)
	}
	// Idle: nothing is logged until 60 ticks have passed.
	size := g.size()
	g.produce(context.Background(), false)
	if g.size() != size {
		t.Fatal("an idle tick was logged at once")
	}
}

func ptr[T any](v T) *T { return &v }

// Property: random sequences of actions, holds, answers, status changes and
// delegations, then the kernel's state equals a fresh replay of the log,
// a restart, and annald rebuild.
func TestRandomSequencesReplayToTheSameState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root := rootOf(t, k)
	rng := rand.New(rand.NewPCG(7, 11))
	var agents []*Actor
	var envs []string
	var holds []string
	for step := range 300 {
		switch op := rng.IntN(10); {
		case op == 0 || len(agents) == 0:
			na, err := k.CreateAgent(ctx, root, ActorRequest{Name: "r", Purpose: "p", Energy: uint64(rng.IntN(300)), Grants: grants("workspace/**:create,mutate"), Trust: ptr(0.8)})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := k.Authenticate(na.Credential)
			agents = append(agents, a)
		case op == 1:
			a := agents[rng.IntN(len(agents))]
			v, _, err := k.IssueEnvelope(ctx, root, EnvelopeRequest{Holder: a.ID, Budget: uint64(rng.IntN(200)), Grants: grants("workspace/*:mutate", "workspace/**:create"), HoldOn: grants("workspace/h/*:mutate")})
			if err == nil {
				envs = append(envs, v.ID)
			}
		case op == 2 && len(holds) > 0:
			d := event.HoldReject
			if rng.IntN(2) == 0 {
				d = event.HoldApprove
			}
			_, _ = k.AnswerHold(ctx, root, holds[rng.IntN(len(holds))], d, "")
		case op == 3:
			a := agents[rng.IntN(len(agents))]
			_, _ = k.SetStatus(ctx, root, a.ID, []string{event.StatusFrozen, event.StatusActive, event.StatusTerminated}[rng.IntN(3)], "")
		default:
			a := agents[rng.IntN(len(agents))]
			target := []string{"workspace/a", "workspace/h/b", "workspace/x/y", "system/z"}[rng.IntN(4)]
			typ := []event.ActionType{event.Mutate, event.Create, event.Observe}[rng.IntN(3)]
			r, err := k.Submit(ctx, a, ActionRequest{Type: typ, Target: target})
			if err == nil && r.Status == StatusHeld {
				holds = append(holds, r.HoldID)
			}
		}
		if step%100 == 99 {
			if diff, err := k.stateMatchesReplay(ctx); err != nil || len(diff) > 0 {
				t.Fatalf("step %d: state differs from replay at %v (%v)", step, diff, err)
			}
		}
	}
	k.mu.Lock()
	before := k.ledger.Snapshot()
	k.mu.Unlock()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	report, err := Rebuild(ctx, cfg)
	if err != nil || len(report.Differences) > 0 {
		t.Fatalf("rebuild: %v %+v", err, report)
	}
	k2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	k2.mu.Lock()
	after := k2.ledger.Snapshot()
	k2.mu.Unlock()
	if string(before) != string(after) {
		t.Fatal("state after restart differs from state before")
	}
}

// An execute whose payload is invalid is refused after its energy was
// reserved; the reservation must be released, not leaked (§5.6).
func TestInvalidExecutePayloadLeaksNoReservation(t *testing.T) {
	g := openGov(t)
	agent, _ := g.agent(25, "tools/*:execute")
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 25, Grants: grants("tools/*:execute")})
	for _, p := range []string{`{"exit_code":0}`, `{"input_oid":"sha256:x","output_oid":"sha256:x","artifact_hash":"sha256:x","exit_code":0}`, `[1]`} {
		_, err := g.Submit(context.Background(), agent, ActionRequest{Type: event.Execute, Target: "tools/run", Payload: []byte(p)})
		if d := denialOf(t, err); d.Stage != StageValidatePayload {
			t.Fatalf("%s: %v", p, err)
		}
	}
	g.mu.Lock()
	inflight := len(g.pending.Actors) + len(g.pending.Envelopes) + len(g.claims.m)
	g.mu.Unlock()
	if inflight != 0 {
		t.Fatalf("%d reservations or claims left in flight", inflight)
	}
	// The whole balance and budget are still there for a valid execute.
	good := fmt.Sprintf(`{"input_oid":"sha256:%[1]s","output_oid":"sha256:%[1]s","artifact_hash":"sha256:%[1]s","exit_code":1}`, strings.Repeat("c", 64))
	if _, err := g.Submit(context.Background(), agent, ActionRequest{Type: event.Execute, Target: "tools/run", Payload: []byte(good)}); err != nil {
		t.Fatalf("valid execute after refused ones: %v", err)
	}
}
