package kernel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/ratelimit"
	"github.com/annal-dev/annal/kernel/ring"
)

// Tests of execution control through the kernel (Agent Hypervisor
// Execution Control 1.0): every gate on the one pipeline, every decision an
// event. Each test's kernel is checked at cleanup against a replay of its
// log (openGov), so every ring, elevation, quarantine and session state
// these tests reach is also reproduced by replay.

// ringAgent creates an agent with a trust score (nil: none, Ring 3), its
// grants, energy and an envelope granting the same.
func (g *govKernel) ringAgent(trust *float64, consensus bool, spec ...string) *Actor {
	g.t.Helper()
	ctx := context.Background()
	na, err := g.CreateAgent(ctx, g.root, ActorRequest{Name: "r", Purpose: "ring test", Energy: 1_000_000, Grants: grants(spec...), Trust: trust, Consensus: consensus})
	if err != nil {
		g.t.Fatal(err)
	}
	if len(spec) > 0 {
		g.envelope(g.root, EnvelopeRequest{Holder: na.Actor.ID, Budget: 500_000, Grants: grants(spec...)})
	}
	a, err := g.Authenticate(na.Credential)
	if err != nil {
		g.t.Fatal(err)
	}
	return a
}

func (g *govKernel) ringOf(id string) ring.Ring {
	g.t.Helper()
	for _, v := range g.Rings(g.root) {
		if v.Agent == id {
			return v.Effective
		}
	}
	g.t.Fatalf("agent %s has no ring view", id)
	return -1
}

// wantGate checks that err is a denial by gate, recorded in the log unless
// the gate's denials are not recorded.
func (g *govKernel) wantGate(err error, gate string) *Denial {
	g.t.Helper()
	if err == nil {
		g.t.Fatalf("allowed; want a %s denial", gate)
	}
	d := denialOf(g.t, err)
	if d.Gate != gate {
		g.t.Fatalf("denied by %q (%v), want gate %q", d.Gate, err, gate)
	}
	if ledger.Recorded(gate) && (!d.Recorded || g.kindAt(d.Index) != event.KindActionDenied) {
		g.t.Fatalf("%s denial not recorded as action.denied: %+v", gate, d)
	}
	return d
}

// §22.1 and §4.1 through the kernel: the ring a trust score gives, strict
// thresholds, consensus for Ring 1, Ring 0 never; Ring 3 by default (§3.3).
func TestSpec22_1_RingAssignment(t *testing.T) {
	g := openGov(t)
	for _, tc := range []struct {
		trust     *float64
		consensus bool
		want      ring.Ring
	}{
		{ptr(0.97), true, ring.Privileged},
		{ptr(0.80), false, ring.Standard},
		{ptr(0.40), false, ring.Sandbox},
		{ptr(0.97), false, ring.Standard}, // no consensus, no Ring 1
		{ptr(0.95), true, ring.Standard},  // > 0.95, strictly
		{ptr(0.60), false, ring.Sandbox},  // > 0.60, strictly
		{ptr(1.0), true, ring.Privileged}, // never Ring 0
		{nil, false, ring.Sandbox},        // §3.3 default
	} {
		a := g.ringAgent(tc.trust, tc.consensus)
		if got := g.ringOf(a.ID); got != tc.want {
			t.Errorf("trust %v consensus %v: %s, want %s", tc.trust, tc.consensus, got, tc.want)
		}
	}
	if _, err := g.CreateAgent(context.Background(), g.root, ActorRequest{Name: "x", Purpose: "y", Trust: ptr(1.5)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("trust 1.5 accepted: %v", err)
	}
}

// §4.3: a human demotes an agent, by a lower score or an explicit ring; a
// ring above what the score gives is refused; agents cannot assign rings.
func TestSpec4_3_Demotion(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.97), true, "workspace/**:mutate")
	if _, err := g.AssignRing(ctx, g.root, a.ID, RingAssignment{Trust: 0.97, Consensus: true, Ring: ptr(3), Reason: "drift"}); err != nil {
		t.Fatal(err)
	}
	if got := g.ringOf(a.ID); got != ring.Sandbox {
		t.Fatalf("after demotion to 3: %s", got)
	}
	g.wantGate(ptrErr(g.submit(a, event.Mutate, "workspace/x")), GateRing)
	if _, err := g.AssignRing(ctx, g.root, a.ID, RingAssignment{Trust: 0.7, Ring: ptr(1)}); denialOf(t, err).Gate != GateRing {
		t.Fatalf("ring 1 with trust 0.7 accepted: %v", err)
	}
	if _, err := g.AssignRing(ctx, g.root, a.ID, RingAssignment{Trust: 0.7, Ring: ptr(0)}); err == nil {
		t.Fatal("ring 0 assigned")
	}
	if _, err := g.AssignRing(ctx, a, a.ID, RingAssignment{Trust: 1, Consensus: true}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("an agent assigned its own ring: %v", err)
	}
	if _, err := g.AssignRing(ctx, g.root, a.ID, RingAssignment{Trust: 0.7}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.submit(a, event.Mutate, "workspace/x"); err != nil {
		t.Fatalf("ring 2 again: %v", err)
	}
}

func ptrErr(_ *Receipt, err error) error { return err }

// §5.2 and §22.2 through the kernel: descriptors classify actions by
// target; the most privileged ring any applicable descriptor needs wins;
// admin actions need Ring 0 and are never available (§6.1).
func TestSpec22_2_ActionClassification(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	reg := func(id string, rev ring.Reversibility, readOnly, admin bool, applies ...string) {
		t.Helper()
		d := ring.Descriptor{ActionID: id, Name: id, ExecuteAPI: "/api/" + id, Reversibility: rev, IsReadOnly: readOnly, IsAdmin: admin}
		if _, err := g.RegisterAction(ctx, g.root, d, grants(applies...)); err != nil {
			t.Fatal(err)
		}
	}
	reg("pay", ring.None, false, false, "payments/**:mutate,create")
	reg("reconfigure", ring.Full, false, true, "hypervisor/**:mutate")
	reg("read-ledger", ring.Full, true, false, "books/**:observe")
	reg("edit", ring.Full, false, false, "docs/**:mutate")
	all := []string{"payments/**:mutate", "hypervisor/**:mutate", "books/**:observe", "docs/**:mutate", "workspace/**:mutate"}
	r1 := g.ringAgent(ptr(0.99), true, all...)
	r2 := g.ringAgent(ptr(0.8), false, all...)
	r3 := g.ringAgent(ptr(0.3), false, all...)
	for _, tc := range []struct {
		who    *Actor
		t      event.ActionType
		target string
		gate   string
	}{
		{r3, event.Observe, "books/2026", ""},           // read-only: Ring 3
		{r3, event.Mutate, "docs/a", GateRing},          // FULL, not read-only: Ring 2
		{r2, event.Mutate, "docs/a", ""},                // Ring 2
		{r2, event.Mutate, "payments/x", GateRing},      // NONE: Ring 1
		{r1, event.Mutate, "payments/x", ""},            // Ring 1
		{r1, event.Mutate, "hypervisor/cfg", GateRing},  // admin: Ring 0, never
		{r2, event.Mutate, "workspace/plain", ""},       // no descriptor: mutate needs Ring 2
		{r3, event.Mutate, "workspace/plain", GateRing}, // ... which Ring 3 is not
	} {
		_, err := g.submit(tc.who, tc.t, tc.target)
		if tc.gate == "" {
			if err != nil {
				t.Errorf("%s %s by %s: %v", tc.t, tc.target, g.ringOf(tc.who.ID), err)
			}
			continue
		}
		d := g.wantGate(err, tc.gate)
		if tc.target == "hypervisor/cfg" && !strings.Contains(d.Reason, "SRE") {
			t.Errorf("Ring 0 denial does not say an SRE witness is needed: %s", d.Reason)
		}
	}
	// §16: the view gives each descriptor's ring and default risk weight.
	for _, v := range g.Descriptors() {
		want := map[string]float64{"pay": 0.95, "reconfigure": 0.2, "read-ledger": 0.2, "edit": 0.2}[v.Descriptor.Descriptor.ActionID]
		if v.RiskWeight != want || v.RequiredRing != v.Descriptor.Descriptor.RequiredRing() {
			t.Errorf("descriptor %s: risk %v ring %s", v.Descriptor.Descriptor.ActionID, v.RiskWeight, v.RequiredRing)
		}
	}
	// Naming a descriptor that does not apply, or none that exists, is denied.
	if _, err := g.Submit(ctx, r1, ActionRequest{Type: event.Mutate, Target: "docs/a", ActionID: "pay"}); denialOf(t, err).Gate != GateRing {
		t.Fatalf("action_id of another target accepted: %v", err)
	}
	if _, err := g.Submit(ctx, r1, ActionRequest{Type: event.Mutate, Target: "docs/a", ActionID: "nope"}); denialOf(t, err).Gate != GateRing {
		t.Fatalf("unknown action_id accepted: %v", err)
	}
	// §5.3: a descriptor that breaks the validation rules is refused.
	bad := ring.Descriptor{ActionID: "bad\n", Name: "x", ExecuteAPI: "/x", Reversibility: ring.Full}
	if _, err := g.RegisterAction(ctx, g.root, bad, grants("x/**:mutate")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("action_id with a trailing newline registered: %v", err)
	}
	if _, err := g.RegisterAction(ctx, r1, ring.Descriptor{ActionID: "x", Name: "x", ExecuteAPI: "/x", Reversibility: ring.Full}, grants("x/**:mutate")); !errors.Is(err, ErrForbidden) {
		t.Fatalf("an agent registered a descriptor: %v", err)
	}
}

// §7: resource constraints per ring, the Ring 2 network allowlist root
// configures, filesystem scope, subprocesses and tools.
func TestSpec7_ResourceConstraints(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	r1 := g.ringAgent(ptr(0.99), true, "workspace/**:execute,mutate")
	r2 := g.ringAgent(ptr(0.8), false, "workspace/**:execute,mutate")
	r3 := g.ringAgent(ptr(0.2), false, "workspace/**:execute,mutate")
	use := func(a *Actor, t event.ActionType, r event.Resources) error {
		_, err := g.Submit(ctx, a, ActionRequest{Type: t, Target: "workspace/job", Resources: &r})
		return err
	}
	// Ring 3: observe only, and no network even then.
	g.wantGate(use(r3, event.Observe, event.Resources{Network: []string{"example.com"}}), GateResources)
	g.wantGate(use(r3, event.Observe, event.Resources{Subprocess: true}), GateResources)
	g.wantGate(use(r3, event.Observe, event.Resources{Tools: 3}), GateResources)
	if err := use(r3, event.Observe, event.Resources{Tools: 2}); err != nil {
		t.Fatalf("ring 3 with 2 tools: %v", err)
	}
	// Ring 2: network only to the allowlist, which starts empty.
	g.wantGate(use(r2, event.Mutate, event.Resources{Network: []string{"api.example.com"}}), GateResources)
	if _, err := g.ConfigureRings(ctx, g.root, []string{"api.example.com", "*.corp.example"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ConfigureRings(ctx, r1, nil); !errors.Is(err, ErrForbidden) {
		t.Fatalf("an agent configured the rings: %v", err)
	}
	for dest, ok := range map[string]bool{
		"api.example.com": true, "api.example.com:443": true, "git.corp.example": true,
		"api.example.com.evil.net": false, "evilapi.example.com": false, "corp.example": false, "user@api.example.com": false,
	} {
		err := use(r2, event.Mutate, event.Resources{Network: []string{dest}})
		if ok != (err == nil) {
			t.Errorf("ring 2 to %q: %v", dest, err)
		}
	}
	// Ring 2 writes only inside its own folder (agents/<id>) or session.
	if err := use(r2, event.Mutate, event.Resources{FilesystemWrite: []string{"agents/" + r2.ID + "/out.txt"}}); err != nil {
		t.Fatalf("ring 2 writing its own folder: %v", err)
	}
	for _, p := range []string{"agents/" + r1.ID + "/x", "agents/" + r2.ID + "/../" + r1.ID + "/x", "etc/passwd", "/etc/passwd", "agents/" + r2.ID + "x/y"} {
		g.wantGate(use(r2, event.Mutate, event.Resources{FilesystemWrite: []string{p}}), GateResources)
	}
	// Ring 1: full access, any destination, 16 tools.
	if err := use(r1, event.Mutate, event.Resources{Network: []string{"anywhere.example"}, FilesystemWrite: []string{"etc/x"}, Subprocess: true, Tools: 16}); err != nil {
		t.Fatalf("ring 1: %v", err)
	}
	g.wantGate(use(r1, event.Mutate, event.Resources{Tools: 17}), GateResources)
	// The declared resources are part of the event, covered by its hash.
	rc, err := g.Submit(ctx, r1, ActionRequest{Type: event.Mutate, Target: "workspace/job", Resources: &event.Resources{Subprocess: true}})
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := g.Entry(ctx, rc.Index)
	if !strings.Contains(string(entry), `"resources":{"subprocess":true}`) {
		t.Fatalf("event does not record its resources: %s", entry)
	}
}

// §8 and §22.3: elevation is time-bounded and trust-gated; Ring 1 needs a
// human's attestation; Ring 0 never; one per agent and session.
func TestSpec22_3_ElevationDenial(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	req := func(by *Actor, agent *Actor, r int) error {
		_, _, err := g.RequestElevation(ctx, by, ElevationRequest{Agent: agent.ID, Ring: r, Reason: "test"})
		return err
	}
	reason := func(err error) ring.DenialReason {
		t.Helper()
		var ed *ElevationDenied
		if !errors.As(err, &ed) {
			t.Fatalf("%v is not an elevation denial", err)
		}
		return ed.Reason
	}
	low := g.ringAgent(ptr(0.65), false) // ring 2, trust 0.65
	if r := reason(req(g.root, low, 1)); r != ring.InsufficientTrust {
		t.Errorf("ring 2 → 1 at trust 0.65: %s, want insufficient_trust", r)
	}
	if r := reason(req(g.root, low, 0)); r != ring.Ring0Forbidden {
		t.Errorf("ring 2 → 0: %s, want ring_0_forbidden", r)
	}
	if r := reason(req(g.root, low, 2)); r != ring.InvalidTarget {
		t.Errorf("ring 2 → 2: %s, want invalid_target", r)
	}
	high := g.ringAgent(ptr(0.9), false) // ring 2, trust 0.9
	if r := reason(req(high, high, 1)); r != ring.NoSponsorship {
		t.Errorf("agent's own request for ring 1: %s, want no_sponsorship", r)
	}
	none := g.ringAgent(nil, false)
	if r := reason(req(g.root, none, 2)); r != ring.InsufficientTrust {
		t.Errorf("no trust score recorded: %s, want insufficient_trust", r)
	}
	// A human's request for ring 1 is the attestation.
	if err := req(g.root, high, 1); err != nil {
		t.Fatal(err)
	}
	if r := reason(req(g.root, high, 1)); r != ring.InvalidTarget && r != ring.DuplicateElevation {
		t.Errorf("second elevation: %s", r)
	}
	// Agents may ask for Ring 2 themselves, when their trust allows.
	mid := g.ringAgent(ptr(0.55), false) // ring 3, trust 0.55 >= 0.50
	if err := req(mid, mid, 2); err != nil {
		t.Fatalf("ring 3 → 2 at 0.55 by the agent: %v", err)
	}
	if r := reason(req(mid, mid, 2)); r != ring.DuplicateElevation {
		t.Errorf("a second elevation in the same session: %s, want duplicate_elevation", r)
	}
	// Another agent (or its human) may not ask for it.
	if err := req(high, mid, 2); !errors.Is(err, ErrForbidden) {
		t.Errorf("an agent elevated another: %v", err)
	}
}

// §19.2: a denied elevation is the specification's RingElevationError: an
// *ElevationDenied, a forbidden request, whose Reason is the §8.3 reason
// and whose message names the agent, both rings and the reason.
func TestSpec19_2_ElevationError(t *testing.T) {
	g := openGov(t)
	high := g.ringAgent(ptr(0.9), false) // ring 2, trust 0.9
	_, _, err := g.RequestElevation(context.Background(), high, ElevationRequest{Agent: high.ID, Ring: 1, Reason: "deploy"})
	var ed *ElevationDenied
	if !errors.As(err, &ed) || ed.Reason != ring.NoSponsorship || ed.Code != string(ring.NoSponsorship) {
		t.Fatalf("an agent's own request for ring 1: %v, want a no_sponsorship elevation denial", err)
	}
	if !errors.Is(err, ErrForbidden) {
		t.Errorf("%v is not ErrForbidden", err)
	}
	for _, want := range []string{high.ID, "ring 1", "ring 2", "no_sponsorship"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

// §8.5–8.6 and the replay attack: an elevation lifts the effective ring until it expires on
// its own; the TTL is clamped to an hour; using it after expiry is denied
// (the replay attack), and the kernel records the end.
func TestAttack_ElevationReplayAfterExpiry(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.9), false, "payments/**:mutate")
	d := ring.Descriptor{ActionID: "pay", Name: "pay", ExecuteAPI: "/pay", Reversibility: ring.None}
	if _, err := g.RegisterAction(ctx, g.root, d, grants("payments/**:mutate")); err != nil {
		t.Fatal(err)
	}
	g.wantGate(ptrErr(g.submit(a, event.Mutate, "payments/1")), GateRing)
	_, v, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: a.ID, Ring: 1, TTL: 10 * time.Hour, Reason: "month end"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Expires.Sub(g.clock.Now()) != ring.MaxElevationTTL {
		t.Fatalf("ttl not clamped to an hour: expires %s", v.Expires)
	}
	if v.AttestedBy != RootID {
		t.Fatalf("attested_by %q", v.AttestedBy)
	}
	if _, err := g.submit(a, event.Mutate, "payments/1"); err != nil {
		t.Fatalf("elevated to ring 1: %v", err)
	}
	g.clock.advance(ring.MaxElevationTTL)
	// Expired by the clock: denied at once, before the kernel's tick.
	g.wantGate(ptrErr(g.submit(a, event.Mutate, "payments/2")), GateRing)
	g.expireControl(ctx)
	g.mu.Lock()
	ended := g.ledger.Elevations[v.ID].Ended
	g.mu.Unlock()
	if ended != event.EndExpired {
		t.Fatalf("elevation ended %q, want expired", ended)
	}
	g.wantGate(ptrErr(g.submit(a, event.Mutate, "payments/3")), GateRing)
	// Revocation ends one at once; a demotion ends those the trust no
	// longer earns.
	_, v2, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: a.ID, Ring: 1, Reason: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.RevokeElevation(ctx, a, v2.ID, "done"); err != nil {
		t.Fatal(err)
	}
	g.wantGate(ptrErr(g.submit(a, event.Mutate, "payments/4")), GateRing)
	_, v3, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: a.ID, Ring: 1, Reason: "third"})
	if err != nil {
		t.Fatal(err)
	}
	// The kernel records the end itself (the server's
	// TestSignedRequests_DemotionEndsElevations: by a human who signs).
	if _, err := g.AssignRing(ctx, g.root, a.ID, RingAssignment{Trust: 0.7}); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	ended = g.ledger.Elevations[v3.ID].Ended
	g.mu.Unlock()
	if ended != event.EndUntrusted {
		t.Fatalf("elevation kept after trust fell to 0.7: %q", ended)
	}
	// Only the kernel ends an elevation for trust, and only one the trust
	// no longer earns.
	b := g.ringAgent(ptr(0.9), false, "payments/**:mutate")
	_, v4, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: b.ID, Ring: 1, Reason: "fourth"})
	if err != nil {
		t.Fatal(err)
	}
	for _, forged := range []*event.Event{
		{Kind: event.KindElevationEnded, Actor: RootID, ElevationEnd: &event.ElevationEnd{ID: v4.ID, Agent: b.ID, End: event.EndUntrusted}},
		{Kind: event.KindElevationEnded, Actor: event.KernelActor, ElevationEnd: &event.ElevationEnd{ID: v4.ID, Agent: b.ID, End: event.EndUntrusted}},
	} {
		forged.V, forged.ID, forged.Time = event.Version, "0190f1a8-7c00-7d00-8e00-0000000000f1", event.At(g.clock.Now())
		g.mu.Lock()
		err := g.ledger.Check(forged, ledger.Options{})
		g.mu.Unlock()
		if err == nil {
			t.Fatalf("%s ended an elevation its agent's trust earns", forged.Actor)
		}
	}
}

// §8.8: acting under an envelope delegated by another agent, an agent
// never exceeds the delegating agent's effective ring.
func TestSpec8_8_ChildNeverExceedsParent(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	parent := g.ringAgent(ptr(0.3), false, "workspace/**:mutate") // ring 3
	child := g.ringAgent(ptr(0.8), false, "workspace/**:mutate")  // ring 2
	pv := g.Envelopes(parent)[0]
	cv, _, err := g.IssueEnvelope(ctx, parent, EnvelopeRequest{Holder: child.ID, Parent: pv.ID, Budget: 100, Grants: grants("workspace/**:mutate")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Submit(ctx, child, ActionRequest{Type: event.Mutate, Target: "workspace/a"}); err != nil {
		t.Fatalf("under its own envelope, ring 2: %v", err)
	}
	_, err = g.Submit(ctx, child, ActionRequest{Type: event.Mutate, Target: "workspace/a", Envelope: cv.ID})
	if d := g.wantGate(err, GateRing); !strings.Contains(d.Reason, "ring 3") {
		t.Fatalf("child's ring under the parent's envelope: %s", d.Reason)
	}
}

// §9 and §22.4: a Ring 3 agent (5/s, burst 10) gets 10 actions, the 11th
// is RateLimitExceeded; denials are not logged; an elevation changes the
// bucket's limits but does not refill it.
func TestSpec22_4_RateLimitExhaustion(t *testing.T) {
	rateClock := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := openGov(t, func(c *Config) { c.DisableRateLimit = false; c.RateClock = rateClock.Now })
	a := g.ringAgent(ptr(0.55), false)
	for i := range 10 {
		if _, err := g.submit(a, event.Observe, "workspace/x"); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	before := g.size()
	_, err := g.submit(a, event.Observe, "workspace/x")
	if !errors.Is(err, ErrRateLimited) || denialOf(t, err).Gate != GateRateLimit {
		t.Fatalf("11th request: %v, want RateLimitExceeded", err)
	}
	if g.size() != before {
		t.Fatalf("a rate-limited request was written to the log")
	}
	// The agent's own requests to the kernel draw from the same bucket.
	if _, _, err := g.RequestElevation(context.Background(), a, ElevationRequest{Agent: a.ID, Ring: 2, Reason: "burst"}); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("elevation request with an empty bucket: %v", err)
	}
	// §9.5: elevation to Ring 2 recreates the bucket with 20/s, burst 40,
	// but does not hand out tokens; time does.
	rateClock.advance(200 * time.Millisecond) // one token at 5/s, for the request
	if _, _, err := g.RequestElevation(context.Background(), a, ElevationRequest{Agent: a.ID, Ring: 2, Reason: "burst"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.submit(a, event.Observe, "workspace/x"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("elevation refilled the bucket: %v", err)
	}
	rateClock.advance(time.Second) // 20 tokens at ring 2
	for i := range 20 {
		if _, err := g.submit(a, event.Observe, "workspace/x"); err != nil {
			t.Fatalf("after 1 s at ring 2, request %d: %v", i+1, err)
		}
	}
	if _, err := g.submit(a, event.Observe, "workspace/x"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("21st request in that second: %v", err)
	}
}

// Attack: an agent cannot multiply its rate by acting through other
// sessions or envelopes (the bucket is the agent's), and many identities
// cannot evict a drained bucket to restart it: at the bucket limit new
// agents are refused instead (fail closed, §9.6, §20.3).
func TestAttack_RateLimitBypassWithManyIdentities(t *testing.T) {
	rateClock := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := openGov(t, func(c *Config) {
		c.DisableRateLimit, c.RateClock, c.MaxRateBuckets = false, rateClock.Now, 3
		c.RateLimits = map[ring.Ring]ratelimit.Limit{ring.Root: {Rate: 1, Burst: 2}, ring.Privileged: {Rate: 1, Burst: 2}, ring.Standard: {Rate: 1, Burst: 2}, ring.Sandbox: {Rate: 1, Burst: 2}}
	})
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false, "workspace/**:mutate")
	g.envelope(g.root, EnvelopeRequest{Holder: a.ID, Budget: 100, Grants: grants("workspace/**:mutate")})
	envs := g.Envelopes(a)
	for i := range 2 {
		if _, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "workspace/x", Envelope: envs[i].ID}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range envs {
		if _, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "workspace/x", Envelope: e.ID}); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("another envelope gave more tokens: %v", err)
		}
	}
	// Two more identities fill the limiter (3 buckets); a fourth is refused
	// rather than a drained bucket being forgotten.
	var others []*Actor
	for range 3 {
		others = append(others, g.ringAgent(ptr(0.8), false))
	}
	if _, err := g.submit(others[0], event.Observe, "workspace/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.submit(others[1], event.Observe, "workspace/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.submit(others[2], event.Observe, "workspace/x"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("a fourth bucket beyond the limit of 3: %v", err)
	}
	if _, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "workspace/x"}); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("the flood restarted the drained bucket: %v", err)
	}
}

// An elevation run out by the clock, whose end the kernel has not yet
// recorded, does not block a new one: live and in the fold, which decide
// with the same time.
func TestSpec8_6_NewElevationAfterUnrecordedExpiry(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.9), false)
	if _, _, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: a.ID, Ring: 1, TTL: time.Minute, Reason: "one"}); err != nil {
		t.Fatal(err)
	}
	g.clock.advance(time.Minute)
	if _, _, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: a.ID, Ring: 1, TTL: time.Minute, Reason: "two"}); err != nil {
		t.Fatalf("second elevation after the first ran out: %v", err)
	}
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed != nil {
		t.Fatalf("the fold refused the second elevation: %v", failed)
	}
	g.expireControl(ctx) // ends the first, not the second
	if g.ringOf(a.ID) != ring.Privileged {
		t.Fatalf("the second elevation ended with the first")
	}
}

// §9.5, "MUST recreate the token bucket with the new ring's limits": a
// ring change a human decides gives the agent a new bucket of its new
// ring, full. (An elevation the agent asks for itself keeps the tokens it
// had: TestSpec22_4_RateLimitExhaustion.)
func TestSpec9_5_RingChangeByAHumanRecreatesTheBucket(t *testing.T) {
	rateClock := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := openGov(t, func(c *Config) { c.DisableRateLimit = false; c.RateClock = rateClock.Now })
	a := g.ringAgent(ptr(0.55), false) // Ring 3: 5/s, burst 10
	drained := 0
	for ; drained < 100; drained++ {
		if _, err := g.submit(a, event.Observe, "workspace/x"); errors.Is(err, ErrRateLimited) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if drained != 10 {
		t.Fatalf("Ring 3 gave %d requests, want its burst of 10", drained)
	}
	if _, err := g.AssignRing(context.Background(), g.root, a.ID, RingAssignment{Trust: 0.8, Reason: "reviewed"}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 { // Ring 2: burst 40, at once
		if _, err := g.submit(a, event.Observe, "workspace/x"); err != nil {
			t.Fatalf("after the human's ring change, request %d of Ring 2's 40: %v", i+1, err)
		}
	}
	if _, err := g.submit(a, event.Observe, "workspace/x"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("request 41 at once: %v", err)
	}
}
