package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// builder makes well-formed events for tests; each goes through
// event.Encode and event.Parse, so the ledger sees what a log would hold.
type builder struct {
	t *testing.T
	n int
}

func (b *builder) ev(actor string, kind event.Kind, set func(*event.Event)) *event.Event {
	b.t.Helper()
	b.n++
	e := &event.Event{V: event.Version, ID: fmt.Sprintf("019a5c3e-0000-7000-8000-%012x", b.n),
		Time: "2026-11-22T10:00:00Z", Kind: kind, Actor: actor}
	set(e)
	entry, err := event.Encode(e)
	if err != nil {
		b.t.Fatalf("encode %s: %v", kind, err)
	}
	back, err := event.Parse(entry)
	if err != nil {
		b.t.Fatalf("parse %s: %v", kind, err)
	}
	return back
}

func cred(id string) string { return event.CredentialHash("credential of " + id) }

func (b *builder) genesis(energy uint64) *event.Event {
	cfg := event.DefaultEnergy
	cfg.Genesis = energy
	return b.ev(RootID, event.KindGenesis, func(e *event.Event) {
		e.Log = &event.LogInfo{Origin: "example.com/test", Software: "test", Energy: &cfg}
		e.Subject = &event.ActorRecord{ID: RootID, Kind: event.Human, Name: "root", CredentialSHA256: cred(RootID),
			Grants: []event.Grant{{Pattern: "**", Actions: []event.ActionType{"create", "execute", "mutate", "observe"}}}}
	})
}

func (b *builder) agent(creator, id string, energy uint64) *event.Event {
	return b.ev(creator, event.KindActorCreated, func(e *event.Event) {
		e.Subject = &event.ActorRecord{ID: id, Kind: event.Agent, Name: id, Purpose: "test", Creator: creator,
			CredentialSHA256: cred(id), Energy: energy,
			Grants: []event.Grant{{Pattern: "workspace/**", Actions: []event.ActionType{"create", "mutate"}}}}
	})
}

func (b *builder) envelope(issuer, id, holder, parent string, budget uint64, holdOn ...string) *event.Event {
	return b.ev(issuer, event.KindEnvelopeIssued, func(e *event.Event) {
		e.Envelope = &event.Envelope{ID: id, Holder: holder, Issuer: issuer, Parent: parent, Budget: budget,
			Grants: []event.Grant{{Pattern: "workspace/**", Actions: []event.ActionType{"create", "mutate"}}}}
		for _, p := range holdOn {
			e.Envelope.HoldOn = append(e.Envelope.HoldOn, event.Grant{Pattern: p, Actions: []event.ActionType{"mutate"}})
		}
	})
}

func (b *builder) action(actor, envelope, target string, settled uint64) *event.Event {
	return b.ev(actor, event.KindAction, func(e *event.Event) {
		e.Action = &event.Action{Type: event.Mutate, Target: target, Envelope: envelope}
		e.Decision = &event.Decision{Outcome: event.OutcomeCommitted, Cost: settled, Reserved: settled, Settled: settled}
	})
}

func (b *builder) holdRequest(actor, envelope, id, target string, reserved uint64) *event.Event {
	return b.ev(actor, event.KindHoldRequested, func(e *event.Event) {
		e.Action = &event.Action{Type: event.Mutate, Target: target, Envelope: envelope}
		e.Hold = &event.Hold{ID: id, Envelope: envelope, Reserved: reserved}
	})
}

func (b *builder) holdAnswer(by, id, decision string, settled uint64) *event.Event {
	return b.ev(by, event.KindHoldAnswered, func(e *event.Event) {
		e.Hold = &event.Hold{ID: id, Decision: decision, AnsweredBy: by, Settled: settled}
	})
}

func (b *builder) approved(actor, envelope, id, target, by string, reserved uint64) *event.Event {
	return b.ev(actor, event.KindAction, func(e *event.Event) {
		e.Action = &event.Action{Type: event.Mutate, Target: target, Envelope: envelope}
		e.Decision = &event.Decision{Outcome: event.OutcomeCommitted, Cost: reserved, Reserved: reserved, Settled: reserved}
		e.Hold = &event.Hold{ID: id, Decision: event.HoldApprove, AnsweredBy: by}
	})
}

func (b *builder) produce(ticks uint64, credits ...event.Credit) *event.Event {
	return b.ev(event.KernelActor, event.KindEnergyProduced, func(e *event.Event) {
		e.Production = &event.Production{Ticks: ticks, Credits: credits}
	})
}

func fold(t *testing.T, events ...*event.Event) *Ledger {
	t.Helper()
	l := New()
	for _, e := range events {
		if err := l.Apply(l.Size, e); err != nil {
			t.Fatalf("apply %s: %v", e.Kind, err)
		}
	}
	return l
}

// mustRefuse applies e, expects ErrInconsistent mentioning want, and checks
// that the refusal changed nothing.
func mustRefuse(t *testing.T, l *Ledger, e *event.Event, want string) {
	t.Helper()
	before := snapshot(t, l)
	err := l.Apply(l.Size, e)
	if !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), want) {
		t.Fatalf("apply %s: %v, want a refusal mentioning %q", e.Kind, err, want)
	}
	if after := snapshot(t, l); after != before {
		t.Fatalf("a refused %s changed the ledger:\nbefore %s\nafter  %s", e.Kind, before, after)
	}
}

func snapshot(t *testing.T, l *Ledger) string {
	t.Helper()
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGenesisAndAgentFunding(t *testing.T) {
	b := &builder{t: t}
	l := fold(t, b.genesis(1000), b.agent(RootID, "agent-a", 300))
	if got := l.Actors[RootID].Balance; got != 700 {
		t.Fatalf("root balance %d, want 700", got)
	}
	if a := l.Actors["agent-a"]; a.Balance != 300 || !a.Active() {
		t.Fatalf("agent %+v", a)
	}
	if a, ok := l.ActorByCredential(cred("agent-a")); !ok || a.ID != "agent-a" {
		t.Fatal("agent not found by credential")
	}
	mustRefuse(t, l, b.agent(RootID, "agent-b", 701), "has 700 available")
	mustRefuse(t, l, b.agent("agent-a", "agent-c", 0), "only humans create actors")
	mustRefuse(t, l, b.agent(RootID, "agent-a", 0), "already exists")
}

// INV-5 of the paper's §6.2, part 1: budget 100, mutate 15, six succeed
// (100 → 85 → 70 → 55 → 40 → 25 → 10), the seventh cannot settle.
func TestINV5_EnvelopeExhaustion(t *testing.T) {
	b := &builder{t: t}
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-e", 100), b.envelope(RootID, "env-1", "agent-e", "", 100))
	want := []uint64{85, 70, 55, 40, 25, 10}
	for i, w := range want {
		if err := l.Apply(l.Size, b.action("agent-e", "env-1", fmt.Sprintf("workspace/e/%d", i), 15)); err != nil {
			t.Fatalf("mutate %d: %v", i+1, err)
		}
		if a, v := l.Actors["agent-e"], l.Envelopes["env-1"]; a.Balance != w || v.Remaining() != w {
			t.Fatalf("after mutate %d: balance %d, envelope remaining %d, want %d", i+1, a.Balance, v.Remaining(), w)
		}
	}
	mustRefuse(t, l, b.action("agent-e", "env-1", "workspace/e/6", 15), "cannot settle 15")
	if l.Actors["agent-e"].Balance != 10 {
		t.Fatal("balance moved")
	}
}

// INV-5 part 2: a hold reserves 15, a reject settles ⌈20% × 15⌉ = 3: 1000 → 997.
func TestINV5_HoldCommitment(t *testing.T) {
	b := &builder{t: t}
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-h", 1000), b.envelope(RootID, "env-h", "agent-h", "", 1000, "workspace/gated/*"),
		b.holdRequest("agent-h", "env-h", "hold-1", "workspace/gated/file", 15))
	a, v := l.Actors["agent-h"], l.Envelopes["env-h"]
	if a.Available() != 985 || v.Remaining() != 985 || l.Holds["hold-1"].Status != HoldPending {
		t.Fatalf("while held: available %d, envelope remaining %d", a.Available(), v.Remaining())
	}
	if c := l.Energy.Commitment(15); c != 3 {
		t.Fatalf("commitment of 15 is %d, want 3", c)
	}
	mustRefuse(t, l, b.holdAnswer("agent-h", "hold-1", event.HoldReject, 3), "not a human")
	mustRefuse(t, l, b.holdAnswer(RootID, "hold-1", event.HoldReject, 16), "more than the 15 it reserved")
	if err := l.Apply(l.Size, b.holdAnswer(RootID, "hold-1", event.HoldReject, 3)); err != nil {
		t.Fatal(err)
	}
	if a.Balance != 997 || a.Reserved != 0 || v.Consumed != 3 || v.Reserved != 0 || l.Holds["hold-1"].Status != HoldRejected {
		t.Fatalf("after reject: actor %+v envelope %+v", a, v)
	}
	mustRefuse(t, l, b.holdAnswer(RootID, "hold-1", event.HoldReject, 3), "already rejected")
}

func TestHoldApproveSettlesTheReservation(t *testing.T) {
	b := &builder{t: t}
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-h", 100), b.envelope(RootID, "env-h", "agent-h", "", 100, "workspace/gated/*"),
		b.holdRequest("agent-h", "env-h", "hold-1", "workspace/gated/file", 15))
	mustRefuse(t, l, b.approved("agent-h", "env-h", "hold-1", "workspace/gated/other", RootID, 15), "does not match hold")
	mustRefuse(t, l, b.approved("agent-h", "env-h", "hold-1", "workspace/gated/file", RootID, 14), "reserved 15 but settles 14")
	if err := l.Apply(l.Size, b.approved("agent-h", "env-h", "hold-1", "workspace/gated/file", RootID, 15)); err != nil {
		t.Fatal(err)
	}
	a, v := l.Actors["agent-h"], l.Envelopes["env-h"]
	if a.Balance != 85 || a.Reserved != 0 || v.Consumed != 15 || v.Reserved != 0 || l.Holds["hold-1"].Status != HoldApproved {
		t.Fatalf("after approve: actor %+v envelope %+v hold %+v", a, v, l.Holds["hold-1"])
	}
	// A timeout is the kernel's alone.
	l2 := fold(t, b.genesis(10), b.agent(RootID, "agent-t", 10), b.envelope(RootID, "env-t", "agent-t", "", 10, "workspace/**"),
		b.holdRequest("agent-t", "env-t", "hold-2", "workspace/x", 10))
	mustRefuse(t, l2, b.holdAnswer(RootID, "hold-2", event.HoldTimeout, 2), "only the kernel")
	if err := l2.Apply(l2.Size, b.holdAnswer(event.KernelActor, "hold-2", event.HoldTimeout, 2)); err != nil {
		t.Fatal(err)
	}
	if a := l2.Actors["agent-t"]; a.Balance != 8 || a.Reserved != 0 || l2.Holds["hold-2"].Status != HoldTimedOut {
		t.Fatalf("after timeout: %+v", a)
	}
}

func TestDelegationStaysWithinTheParent(t *testing.T) {
	b := &builder{t: t}
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-p", 500), b.agent(RootID, "agent-c", 500),
		b.envelope(RootID, "env-p", "agent-p", "", 100), b.action("agent-p", "env-p", "workspace/a", 15))
	mustRefuse(t, l, b.envelope("agent-p", "env-c", "agent-c", "env-p", 86), "exceeds what env-p has left (85)")
	mustRefuse(t, l, b.envelope("agent-c", "env-c", "agent-c", "env-p", 10), "which agent-c does not hold")
	mustRefuse(t, l, b.envelope("agent-p", "env-c", "agent-c", "", 10), "without delegating")
	if err := l.Apply(l.Size, b.envelope("agent-p", "env-c", "agent-c", "env-p", 85)); err != nil {
		t.Fatal(err)
	}
	// The child's spending counts against the parent too.
	if err := l.Apply(l.Size, b.action("agent-c", "env-c", "workspace/b", 15)); err != nil {
		t.Fatal(err)
	}
	if p := l.Envelopes["env-p"]; p.Consumed != 30 || p.Remaining() != 70 {
		t.Fatalf("parent after child spent: %+v", p)
	}
	mustRefuse(t, l, b.action("agent-c", "env-p", "workspace/b", 15), "held by agent-p")
}

func TestStatusRules(t *testing.T) {
	b := &builder{t: t}
	l := fold(t, b.genesis(100), b.agent(RootID, "agent-s", 0))
	status := func(by, who, s string) *event.Event {
		return b.ev(by, event.KindActorStatus, func(e *event.Event) { e.Status = &event.StatusChange{Actor: who, Status: s} })
	}
	mustRefuse(t, l, status("agent-s", "agent-s", event.StatusFrozen), "only humans")
	mustRefuse(t, l, status(RootID, RootID, event.StatusFrozen), "Axiom 4.1")
	for _, s := range []string{event.StatusFrozen, event.StatusActive, event.StatusTerminated} {
		if err := l.Apply(l.Size, status(RootID, "agent-s", s)); err != nil {
			t.Fatal(err)
		}
	}
	mustRefuse(t, l, status(RootID, "agent-s", event.StatusActive), "final")
}

func TestProductionAndOrder(t *testing.T) {
	b := &builder{t: t}
	l := fold(t, b.genesis(0))
	mustRefuse(t, l, b.produce(1, event.Credit{Actor: RootID, Amount: 101}), "add up to 101")
	mustRefuse(t, l, b.produce(1, event.Credit{Actor: "agent-x", Amount: 1}), "unknown actor")
	if err := l.Apply(l.Size, b.produce(2, event.Credit{Actor: RootID, Amount: 200})); err != nil {
		t.Fatal(err)
	}
	if l.Actors[RootID].Balance != 200 {
		t.Fatal("production not credited")
	}
	if err := l.Apply(l.Size+1, b.produce(1)); err == nil {
		t.Fatal("applied an event out of order")
	}
	l0 := New()
	if err := l0.Apply(0, b.agent(RootID, "agent-x", 0)); err == nil {
		t.Fatal("a log that does not start with genesis")
	}
}

// Events the kernel may have in flight together commute: folding a batch of
// them in any order gives the same ledger. This is what lets Tessera order a
// batch's entries freely.
func TestIndependentEventsCommute(t *testing.T) {
	b := &builder{t: t}
	prefix := []*event.Event{
		b.genesis(1_000_000), b.agent(RootID, "agent-a", 10_000), b.agent(RootID, "agent-b", 10_000),
		b.envelope(RootID, "env-a", "agent-a", "", 5_000, "workspace/held/*"), b.envelope(RootID, "env-b", "agent-b", "", 5_000),
		b.holdRequest("agent-a", "env-a", "hold-1", "workspace/held/x", 15),
	}
	batch := []*event.Event{
		b.action("agent-a", "env-a", "workspace/1", 15), b.action("agent-a", "env-a", "workspace/2", 10),
		b.action("agent-b", "env-b", "workspace/3", 15), b.produce(3, event.Credit{Actor: "agent-a", Amount: 100}, event.Credit{Actor: RootID, Amount: 200}),
		b.holdAnswer(RootID, "hold-1", event.HoldReject, 3), b.holdRequest("agent-b", "env-b", "hold-2", "workspace/y", 15),
		b.ev("agent-a", event.KindActionDenied, func(e *event.Event) {
			e.Action = &event.Action{Type: event.Mutate, Target: "system/x"}
			e.Decision = &event.Decision{Outcome: event.OutcomeDenied}
			e.Denial = &event.Denial{Stage: "validate", Reason: "privileged"}
		}),
	}
	want := ""
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		order := append([]*event.Event(nil), batch...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		l := fold(t, append(append([]*event.Event(nil), prefix...), order...)...)
		l.TakeDirty()
		for _, h := range l.Holds { // where an event sits is all that may differ
			h.RequestedAt, h.AnsweredAt = 0, 0
		}
		got := snapshot(t, l)
		if round == 0 {
			want = got
		} else if got != want {
			t.Fatalf("order %d gives another ledger", round)
		}
	}
	l := fold(t, append(prefix, batch...)...)
	if a := l.Actors["agent-a"]; a.Balance != 10_000-15-10+100-3 || a.Reserved != 0 {
		t.Fatalf("agent-a %+v", a)
	}
	if l.Denials != 1 || !reflect.DeepEqual(l.Holds["hold-2"].Status, HoldPending) {
		t.Fatalf("denials %d, hold-2 %+v", l.Denials, l.Holds["hold-2"])
	}
}

func TestPersistRoundTrip(t *testing.T) {
	b := &builder{t: t}
	l := fold(t, b.genesis(1000), b.agent(RootID, "agent-a", 300), b.envelope(RootID, "env-1", "agent-a", "", 100, "workspace/h/*"),
		b.holdRequest("agent-a", "env-1", "hold-1", "workspace/h/x", 15), b.action("agent-a", "env-1", "workspace/y", 15))
	stored := map[string][]byte{}
	for _, k := range l.Keys() {
		v, ok := l.Encode(k)
		if !ok {
			t.Fatalf("key %s encodes nothing", k)
		}
		stored[k] = v
	}
	back, err := Load(stored)
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Snapshot()) != string(l.Snapshot()) {
		t.Fatalf("loaded ledger differs:\n%s\n%s", back.Snapshot(), l.Snapshot())
	}
	if a, ok := back.ActorByCredential(cred("agent-a")); !ok || a.ID != "agent-a" {
		t.Fatal("credential index not rebuilt")
	}
	// Folding on from the loaded ledger works as from the original.
	next := b.holdAnswer(RootID, "hold-1", event.HoldReject, 3)
	if err := back.Apply(back.Size, next); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(map[string][]byte{"bogus/x": []byte("{}")}); err == nil {
		t.Fatal("unknown key loaded")
	}
}
