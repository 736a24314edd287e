package kernel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/policy"
)

func defaultPolicy(t *testing.T, name string) policy.Policy {
	t.Helper()
	for _, p := range policy.Defaults() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no default policy %s", name)
	return policy.Policy{}
}

// denyOnly is p with signal_on_violation off: a violation denies and the
// agent lives on.
func denyOnly(p policy.Policy) policy.Policy {
	p.SignalOnViolation = false
	return p
}

// Agent OS policies through the kernel: blocked actions and payload
// patterns deny at the policy gate; policies bind an agent directly or
// through an envelope (and what is delegated from it); changes are
// versioned in the log; a policy may ask for the agent's end on violation.
func TestAgentOS_PolicyGate(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false, "workspace/**:mutate,create")
	b := g.ringAgent(ptr(0.8), false, "workspace/**:mutate,create")
	if _, err := g.SetPolicy(ctx, g.root, denyOnly(defaultPolicy(t, "no_pii"))); err != nil {
		t.Fatal(err)
	}
	if _, err := g.SetPolicy(ctx, a, defaultPolicy(t, "strict")); !errors.Is(err, ErrForbidden) {
		t.Fatalf("an agent defined a policy: %v", err)
	}
	if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "no_pii", Agent: a.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "no_pii", Agent: a.ID}); !errors.Is(err, ErrConflict) {
		t.Fatalf("attached twice: %v", err)
	}
	if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "nope", Agent: a.ID}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("attached an undefined policy: %v", err)
	}
	write := func(who *Actor, payload string) error {
		_, err := g.Submit(ctx, who, ActionRequest{Type: event.Mutate, Target: "workspace/notes", Payload: []byte(payload)})
		return err
	}
	g.wantGate(write(a, `{"text":"my Password is hunter2"}`), GatePolicy)
	if err := write(a, `{"text":"nothing to see"}`); err != nil {
		t.Fatalf("clean payload: %v", err)
	}
	if err := write(b, `{"text":"password"}`); err != nil {
		t.Fatalf("b has no policy: %v", err)
	}
	// Version 2 blocks the action type itself; bound through b's envelope.
	p := policy.Policy{Name: "no_writes", BlockedActions: []string{"create"}}
	if _, err := g.SetPolicy(ctx, g.root, p); err != nil {
		t.Fatal(err)
	}
	p.BlockedActions = []string{"mutate"}
	if _, err := g.SetPolicy(ctx, g.root, p); err != nil {
		t.Fatal(err)
	}
	if ps := g.Policies(); len(ps) != 2 || ps[1].Name != "no_writes" || ps[1].Version != 2 {
		t.Fatalf("policies %+v", ps)
	}
	bv := g.Envelopes(b)[0]
	if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "no_writes", Envelope: bv.ID}); err != nil {
		t.Fatal(err)
	}
	g.wantGate(write(b, `{}`), GatePolicy)
	if _, err := g.Submit(ctx, b, ActionRequest{Type: event.Create, Target: "workspace/new"}); err != nil {
		t.Fatalf("version 2 no longer blocks create: %v", err)
	}
	// Delegated from b's envelope: still bound.
	c := g.ringAgent(ptr(0.8), false, "workspace/**:mutate")
	cv, _, err := g.IssueEnvelope(ctx, b, EnvelopeRequest{Holder: c.ID, Parent: bv.ID, Budget: 10, Grants: grants("workspace/**:mutate")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Submit(ctx, c, ActionRequest{Type: event.Mutate, Target: "workspace/x", Envelope: cv.ID})
	g.wantGate(err, GatePolicy)
	// Detached: allowed again.
	if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "no_writes", Envelope: bv.ID, Detach: true}); err != nil {
		t.Fatal(err)
	}
	if err := write(b, `{}`); err != nil {
		t.Fatalf("after detach: %v", err)
	}
	// signal_on_violation (the seed's strict has it): the kernel sends
	// SIGKILL, which terminates.
	if _, err := g.SetPolicy(ctx, g.root, defaultPolicy(t, "strict")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "strict", Agent: b.ID}); err != nil {
		t.Fatal(err)
	}
	g.wantGate(write(b, `{"sql":"DROP TABLE users"}`), GatePolicy)
	after, _ := g.Actor(b.ID)
	if after.Status != event.StatusTerminated {
		t.Fatalf("SIGKILL did not terminate the agent: %s", after.Status)
	}
	if err := write(b, `{}`); denialOf(t, err).Gate != GateActor {
		t.Fatalf("agent acted after SIGKILL: %v", err)
	}
}

// Seed 002, "Custom Policies": "max_calls_per_minute": 10 bounds the calls
// of an agent the policy is attached to. A call over it is refused with
// RateLimitExceeded, naming the policy, and not logged; the bucket refills
// at that many a minute; an agent without the policy is not bound by it.
func TestSpec002_MaxCallsPerMinute(t *testing.T) {
	rateClock := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := openGov(t, func(c *Config) { c.DisableRateLimit = false; c.RateClock = rateClock.Now })
	ctx := context.Background()
	bound, free := g.ringAgent(ptr(0.8), false), g.ringAgent(ptr(0.8), false)
	if _, err := g.SetPolicy(ctx, g.root, policy.Policy{Name: "banking", BlockedActions: []string{"transfer_funds"}, MaxCallsPerMinute: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "banking", Agent: bound.ID}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := g.submit(bound, event.Observe, "workspace/x"); err != nil {
			t.Fatalf("call %d of 3: %v", i+1, err)
		}
	}
	before := g.size()
	_, err := g.submit(bound, event.Observe, "workspace/x")
	if !errors.Is(err, ErrRateLimited) || !strings.Contains(err.Error(), "policy banking") || denialOf(t, err).Gate != GateRateLimit {
		t.Fatalf("4th call in the minute: %v, want RateLimitExceeded naming policy banking", err)
	}
	if g.size() != before {
		t.Fatal("a call over max_calls_per_minute was written to the log")
	}
	for i := range 5 {
		if _, err := g.submit(free, event.Observe, "workspace/x"); err != nil {
			t.Fatalf("an agent without the policy, call %d: %v", i+1, err)
		}
	}
	rateClock.advance(20 * time.Second) // one call at 3 a minute
	if _, err := g.submit(bound, event.Observe, "workspace/x"); err != nil {
		t.Fatalf("20 s later: %v", err)
	}
	if _, err := g.submit(bound, event.Observe, "workspace/x"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("a second call 20 s later: %v", err)
	}
}

// Seed 002, "Policy Violation → SIGKILL" ("If ANY check fails →
// SIGKILL"): a policy written in the seed's form, which does not mention
// signal_on_violation, ends the agent that breaks it. The denial is
// recorded, then the kernel's SIGKILL, and the answer says which signal
// was sent; a policy that says "signal_on_violation": false only denies.
func TestSpec002_PolicyViolationSIGKILL(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	for _, tc := range []struct {
		spec       string
		terminates bool
	}{
		{`{"name":"banking","blocked_actions":["transfer_funds"],"blocked_patterns":["\\$\\d{6,}"],"max_calls_per_minute":10}`, true},
		{`{"name":"lenient","blocked_patterns":["\\$\\d{6,}"],"signal_on_violation":false}`, false},
	} {
		p, err := policy.Parse([]byte(tc.spec))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.SetPolicy(ctx, g.root, p); err != nil {
			t.Fatal(err)
		}
		a := g.ringAgent(ptr(0.8), false, "payments/**:mutate")
		if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: p.Name, Agent: a.ID}); err != nil {
			t.Fatal(err)
		}
		_, err = g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "payments/x", Payload: []byte(`{"amount":"$1000000"}`)})
		d := g.wantGate(err, GatePolicy)
		if !d.Recorded {
			t.Fatalf("%s: the violation was not recorded", p.Name)
		}
		after, _ := g.Actor(a.ID)
		if !tc.terminates {
			if d.Signal != "" || after.Status != event.StatusActive {
				t.Fatalf("%s (deny only): signal %q, status %s", p.Name, d.Signal, after.Status)
			}
			if _, err := g.submit(a, event.Mutate, "payments/y"); err != nil {
				t.Fatalf("%s (deny only): the agent cannot act after a denial: %v", p.Name, err)
			}
			continue
		}
		if d.Signal != "SIGKILL" || after.Status != event.StatusTerminated {
			t.Fatalf("%s: signal %q, status %s; want SIGKILL and terminated", p.Name, d.Signal, after.Status)
		}
		// The entry after the denial is the kernel's SIGKILL to the agent.
		if ev := g.eventAt(d.Index + 1); ev.Kind != event.KindSignalSent || ev.Actor != event.KernelActor || ev.Signal.Signal != "SIGKILL" ||
			ev.Signal.Agent != a.ID || ev.Signal.Effect != event.EffectTerminate || !strings.Contains(ev.Signal.Reason, "policy banking") {
			t.Fatalf("entry after the denial: %+v", ev)
		}
		if _, err := g.submit(a, event.Mutate, "payments/y"); denialOf(t, err).Gate != GateActor {
			t.Fatalf("the agent acted after SIGKILL: %v", err)
		}
	}
}
