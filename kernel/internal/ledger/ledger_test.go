package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
)

// builder makes well-formed events for tests, one second apart; each goes
// through event.Encode and event.Parse, so the ledger sees what a log would
// hold.
type builder struct {
	t     *testing.T
	n     int
	clock time.Time
	// legacy writes a genesis that names no rules version.
	legacy bool
}

func newBuilder(t *testing.T) *builder {
	return &builder{t: t, clock: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
}

func (b *builder) ev(actor string, kind event.Kind, set func(*event.Event)) *event.Event {
	b.t.Helper()
	b.n++
	b.clock = b.clock.Add(time.Second)
	e := &event.Event{V: event.Version, ID: fmt.Sprintf("019a5c3e-0000-7000-8000-%012x", b.n),
		Time: event.At(b.clock), Kind: kind, Actor: actor}
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

func (b *builder) now() event.Instant { return event.At(b.clock) }

func cred(id string) string { return event.CredentialHash("credential of " + id) }

var allTypes = []event.ActionType{"create", "execute", "mutate", "observe"}

func (b *builder) genesis(energy uint64) *event.Event {
	cfg := event.DefaultEnergy
	cfg.Genesis = energy
	rules, share := Rules, uint64(GenesisShare)
	if b.legacy {
		rules, share = 0, 1
	}
	return b.ev(RootID, event.KindGenesis, func(e *event.Event) {
		e.Log = &event.LogInfo{Origin: "example.com/test", Software: "test", Energy: &cfg, Rules: rules}
		e.Subject = &event.ActorRecord{ID: RootID, Kind: event.Human, Name: "root", CredentialSHA256: cred(RootID),
			Grants: []event.Grant{{Pattern: "**", Actions: allTypes}}, Share: share}
	})
}

func (b *builder) actor(creator, id string, kind event.ActorKind, energy uint64, set func(*event.ActorRecord)) *event.Event {
	return b.ev(creator, event.KindActorCreated, func(e *event.Event) {
		e.Subject = &event.ActorRecord{ID: id, Kind: kind, Name: id, Purpose: "test", Creator: creator,
			CredentialSHA256: cred(id), Energy: energy,
			Grants: []event.Grant{{Pattern: "workspace/**", Actions: []event.ActionType{"create", "execute", "mutate"}}}}
		if set != nil {
			set(e.Subject)
		}
	})
}

func (b *builder) agent(creator, id string, energy uint64) *event.Event {
	return b.actor(creator, id, event.Agent, energy, nil)
}

// trust records a trust score of 0.8 for an agent: Ring 2, which may
// create, mutate and execute (§4.1).
func (b *builder) trust(by, agent string) *event.Event {
	return b.ev(by, event.KindRingAssigned, func(e *event.Event) {
		e.Ring = &event.RingAssignment{Agent: agent, TrustBP: 8000, Ring: 2}
	})
}

func (b *builder) envelope(issuer, id, holder, parent string, budget uint64, holdOn ...string) *event.Event {
	return b.envelopeWith(issuer, id, holder, parent, budget, func(e *event.Envelope) {
		for _, p := range holdOn {
			e.HoldOn = append(e.HoldOn, event.Grant{Pattern: p, Actions: []event.ActionType{"mutate"}})
		}
	})
}

func (b *builder) envelopeWith(issuer, id, holder, parent string, budget uint64, set func(*event.Envelope)) *event.Event {
	return b.ev(issuer, event.KindEnvelopeIssued, func(e *event.Event) {
		e.Envelope = &event.Envelope{ID: id, Holder: holder, Issuer: issuer, Parent: parent, Budget: budget,
			Grants: []event.Grant{{Pattern: "workspace/**", Actions: []event.ActionType{"create", "execute", "mutate"}}}}
		set(e.Envelope)
	})
}

func (b *builder) action(actor, envelope, target string, settled uint64) *event.Event {
	return b.act(actor, envelope, event.Action{Type: event.Mutate, Target: target}, settled)
}

func (b *builder) act(actor, envelope string, a event.Action, settled uint64) *event.Event {
	return b.ev(actor, event.KindAction, func(e *event.Event) {
		a.Envelope = envelope
		e.Action = &a
		e.Decision = &event.Decision{Outcome: event.OutcomeCommitted, Cost: settled, Reserved: settled, Settled: settled}
	})
}

func (b *builder) holdRequest(actor, envelope, id, target string, reserved uint64, deadline event.Instant) *event.Event {
	return b.ev(actor, event.KindHoldRequested, func(e *event.Event) {
		e.Action = &event.Action{Type: event.Mutate, Target: target, Envelope: envelope}
		e.Hold = &event.Hold{ID: id, Envelope: envelope, Reserved: reserved, Deadline: deadline}
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

func (b *builder) status(by, who, s string) *event.Event {
	return b.ev(by, event.KindActorStatus, func(e *event.Event) { e.Status = &event.StatusChange{Actor: who, Status: s} })
}

func (b *builder) revoke(by, id string) *event.Event {
	return b.ev(by, event.KindEnvelopeRevoked, func(e *event.Event) { e.EnvelopeEnd = &event.EnvelopeEnd{ID: id} })
}

func fold(t *testing.T, events ...*event.Event) *Ledger {
	t.Helper()
	l := New()
	l.CheckClaims()
	foldOn(t, l, events...)
	return l
}

func foldOn(t *testing.T, l *Ledger, events ...*event.Event) {
	t.Helper()
	for _, e := range events {
		if err := l.Fold(l.Size, e); err != nil {
			t.Fatalf("fold %s: %v", e.Kind, err)
		}
	}
}

// mustRefuse folds e, expects a FoldError by gate mentioning want, and
// checks that the refusal changed nothing.
func mustRefuse(t *testing.T, l *Ledger, e *event.Event, gate, want string) {
	t.Helper()
	before := snapshot(t, l)
	err := l.Fold(l.Size, e)
	var fe *FoldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrInconsistent) || fe.Gate != gate || !strings.Contains(err.Error(), want) {
		t.Fatalf("fold %s: %v, want a refusal by the %s gate mentioning %q", e.Kind, err, gate, want)
	}
	if fe.Index != l.Size {
		t.Fatalf("the refusal names entry %d, not %d", fe.Index, l.Size)
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

// governed is a log with a funded, trusted agent holding an envelope.
func governed(b *builder) []*event.Event {
	return []*event.Event{b.genesis(1_000_000), b.agent(RootID, "agent-a", 1000), b.trust(RootID, "agent-a"),
		b.envelope(RootID, "env-a", "agent-a", "", 500)}
}

func TestGenesisAndAgentFunding(t *testing.T) {
	b := newBuilder(t)
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
	mustRefuse(t, l, b.agent(RootID, "agent-b", 701), GateEnergy, "has 700 available")
	mustRefuse(t, l, b.agent("agent-a", "agent-c", 0), GateAuthority, "only humans")
	mustRefuse(t, l, b.agent(RootID, "agent-a", 0), GateAuthority, "already exists")
}

// Finding 5 (energy from nothing): a share, like energy, is given from
// what the giver has; a grant from what the giver may do.
func TestShareAndGrantsAreGivenFromTheGiver(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(1000), b.actor(RootID, "alice", event.Human, 100, nil))
	if l.Actors["alice"].Share != 0 || l.Actors[RootID].Share != GenesisShare {
		t.Fatal("a human got a share no one gave it")
	}
	mustRefuse(t, l, b.actor("alice", "agent-greedy", event.Agent, 0, func(r *event.ActorRecord) { r.Share = 1 << 20 }),
		GateEnergy, "gives a share of 1048576 but holds 0")
	mustRefuse(t, l, b.actor("alice", "agent-wide", event.Agent, 0, func(r *event.ActorRecord) {
		r.Grants = []event.Grant{{Pattern: "**", Actions: allTypes}}
	}), GateBoundary, "grants of agent-wide")
	foldOn(t, l, b.actor(RootID, "bob", event.Human, 0, func(r *event.ActorRecord) { r.Share = GenesisShare / 4 }))
	if l.Actors[RootID].Share != GenesisShare*3/4 || l.Actors["bob"].Share != GenesisShare/4 {
		t.Fatalf("shares after giving a quarter: root %d, bob %d", l.Actors[RootID].Share, l.Actors["bob"].Share)
	}
}

// INV-5 of the paper's §6.2, part 1: budget 100, mutate 15, six succeed
// (100 → 85 → 70 → 55 → 40 → 25 → 10), the seventh cannot settle.
func TestINV5_EnvelopeExhaustion(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-e", 100), b.trust(RootID, "agent-e"), b.envelope(RootID, "env-1", "agent-e", "", 100))
	want := []uint64{85, 70, 55, 40, 25, 10}
	for i, w := range want {
		foldOn(t, l, b.action("agent-e", "env-1", fmt.Sprintf("workspace/e/%d", i), 15))
		if a, v := l.Actors["agent-e"], l.Envelopes["env-1"]; a.Balance != w || v.Remaining() != w {
			t.Fatalf("after mutate %d: balance %d, envelope remaining %d, want %d", i+1, a.Balance, v.Remaining(), w)
		}
	}
	mustRefuse(t, l, b.action("agent-e", "env-1", "workspace/e/6", 15), GateEnergy, "cannot settle 15")
}

// INV-5 part 2: a hold reserves 15, a reject settles ⌈20% × 15⌉ = 3: 1000 → 997.
func TestINV5_HoldCommitment(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-h", 1000), b.trust(RootID, "agent-h"),
		b.envelope(RootID, "env-h", "agent-h", "", 1000, "workspace/gated/*"))
	mustRefuse(t, l, b.action("agent-h", "env-h", "workspace/gated/file", 15), GateHold, "waits for a human")
	foldOn(t, l, b.holdRequest("agent-h", "env-h", "hold-1", "workspace/gated/file", 15, event.Instant{}))
	a, v := l.Actors["agent-h"], l.Envelopes["env-h"]
	if a.Available() != 985 || v.Remaining() != 985 || l.Holds["hold-1"].Status != HoldPending {
		t.Fatalf("while held: available %d, envelope remaining %d", a.Available(), v.Remaining())
	}
	mustRefuse(t, l, b.holdAnswer("agent-h", "hold-1", event.HoldReject, 3), GateAuthority, "only humans answer holds")
	mustRefuse(t, l, b.holdAnswer(RootID, "hold-1", event.HoldReject, 16), GateAuthority, "more than the 15 it reserved")
	mustRefuse(t, l, b.holdAnswer(RootID, "hold-1", event.HoldReject, 2), GateAuthority, "its commitment cost is 3")
	foldOn(t, l, b.holdAnswer(RootID, "hold-1", event.HoldReject, 3))
	if a.Balance != 997 || a.Reserved != 0 || v.Consumed != 3 || v.Reserved != 0 || l.Holds["hold-1"].Status != HoldRejected {
		t.Fatalf("after reject: actor %+v envelope %+v", a, v)
	}
	mustRefuse(t, l, b.holdAnswer(RootID, "hold-1", event.HoldReject, 3), GateAuthority, "already rejected")
}

func TestHoldApproveAndTimeout(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-h", 100), b.trust(RootID, "agent-h"),
		b.envelope(RootID, "env-h", "agent-h", "", 100, "workspace/gated/*"),
		b.holdRequest("agent-h", "env-h", "hold-1", "workspace/gated/file", 15, event.Instant{}))
	mustRefuse(t, l, b.approved("agent-h", "env-h", "hold-1", "workspace/gated/other", RootID, 15), GateActor, "does not match hold")
	mustRefuse(t, l, b.approved("agent-h", "env-h", "hold-1", "workspace/gated/file", RootID, 14), GateEnergy, "reserved 15 but settles 14")
	foldOn(t, l, b.approved("agent-h", "env-h", "hold-1", "workspace/gated/file", RootID, 15))
	a, v := l.Actors["agent-h"], l.Envelopes["env-h"]
	if a.Balance != 85 || a.Reserved != 0 || v.Consumed != 15 || v.Reserved != 0 || l.Holds["hold-1"].Status != HoldApproved {
		t.Fatalf("after approve: actor %+v envelope %+v hold %+v", a, v, l.Holds["hold-1"])
	}
	// A timeout is the kernel's alone, and only once the deadline the
	// envelope's hold timeout gives has passed.
	b2 := newBuilder(t)
	l2 := fold(t, b2.genesis(1_000), b2.agent(RootID, "agent-t", 100), b2.trust(RootID, "agent-t"),
		b2.envelopeWith(RootID, "env-t", "agent-t", "", 100, func(e *event.Envelope) {
			e.HoldOn = []event.Grant{{Pattern: "workspace/**", Actions: []event.ActionType{"mutate"}}}
			e.HoldTimeoutSecs = 10
		}))
	mustRefuse(t, l2, b2.holdRequest("agent-t", "env-t", "hold-2", "workspace/x", 15, event.Instant{}), GateHold, "its envelopes' hold timeout gives")
	foldOn(t, l2, b2.holdRequest("agent-t", "env-t", "hold-2", "workspace/x", 15, b2.now().Add(11*time.Second)))
	mustRefuse(t, l2, b2.holdAnswer(RootID, "hold-2", event.HoldTimeout, 3), GateAuthority, "only the kernel")
	mustRefuse(t, l2, b2.holdAnswer(event.KernelActor, "hold-2", event.HoldTimeout, 3), GateAuthority, "not yet")
	b2.clock = b2.clock.Add(10 * time.Second)
	foldOn(t, l2, b2.holdAnswer(event.KernelActor, "hold-2", event.HoldTimeout, 3))
	if a := l2.Actors["agent-t"]; a.Balance != 97 || a.Reserved != 0 || l2.Holds["hold-2"].Status != HoldTimedOut {
		t.Fatalf("after timeout: %+v", a)
	}
}

func TestDelegationStaysWithinTheParent(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-p", 500), b.agent(RootID, "agent-c", 500),
		b.trust(RootID, "agent-p"), b.trust(RootID, "agent-c"),
		b.envelope(RootID, "env-p", "agent-p", "", 100), b.action("agent-p", "env-p", "workspace/a", 15))
	mustRefuse(t, l, b.envelope("agent-p", "env-c", "agent-c", "env-p", 86), GateEnergy, "exceeds what envelope env-p has left (85)")
	mustRefuse(t, l, b.envelope("agent-c", "env-c", "agent-c", "env-p", 10), GateAuthority, "cannot issue an envelope to itself")
	mustRefuse(t, l, b.envelope("agent-c", "env-c", "agent-p", "env-p", 10), GateEnvelope, "which agent-c does not hold")
	mustRefuse(t, l, b.envelope("agent-p", "env-c", "agent-c", "", 10), GateAuthority, "may only delegate an envelope it holds")
	foldOn(t, l, b.envelope("agent-p", "env-c", "agent-c", "env-p", 85))
	// The child's spending counts against the parent too.
	foldOn(t, l, b.action("agent-c", "env-c", "workspace/b", 15))
	if p := l.Envelopes["env-p"]; p.Consumed != 30 || p.Remaining() != 70 {
		t.Fatalf("parent after child spent: %+v", p)
	}
	mustRefuse(t, l, b.action("agent-c", "env-p", "workspace/b", 15), GateEnvelope, "held by agent-p")
	// Once the delegator is frozen, the delegate cannot act under it.
	foldOn(t, l, b.status(RootID, "agent-p", event.StatusFrozen))
	mustRefuse(t, l, b.action("agent-c", "env-c", "workspace/b", 15), GateEnvelope, "delegated by agent-p, who may no longer act")
}

// Finding 9: expiries are instants. ".5Z" is half a second after "Z",
// though it sorts before it as text.
func TestSubEnvelopeMayNotOutliveItsParent(t *testing.T) {
	b := newBuilder(t)
	parentEnd := event.At(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-p", 500), b.agent(RootID, "agent-c", 500),
		b.envelopeWith(RootID, "env-p", "agent-p", "", 100, func(e *event.Envelope) { e.Expires = parentEnd }))
	later := parentEnd.Add(500 * time.Millisecond)
	if later.String() >= parentEnd.String() {
		t.Fatal("the test needs a later instant that sorts earlier as text")
	}
	mustRefuse(t, l, b.envelopeWith("agent-p", "env-c", "agent-c", "env-p", 10, func(e *event.Envelope) { e.Expires = later }),
		GateEnvelope, "may not outlast env-p")
	foldOn(t, l, b.envelopeWith("agent-p", "env-c", "agent-c", "env-p", 10, func(e *event.Envelope) { e.Expires = parentEnd }))
}

func TestStatusRules(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(100), b.agent(RootID, "agent-s", 0), b.actor(RootID, "alice", event.Human, 0, nil))
	mustRefuse(t, l, b.status("agent-s", "agent-s", event.StatusFrozen), GateAuthority, "not a human")
	mustRefuse(t, l, b.status(RootID, RootID, event.StatusFrozen), GateAuthority, "Axiom 4.1")
	mustRefuse(t, l, b.status("alice", "agent-s", event.StatusFrozen), GateAuthority, "only root or agent-s's creator")
	for _, s := range []string{event.StatusFrozen, event.StatusActive, event.StatusTerminated} {
		foldOn(t, l, b.status(RootID, "agent-s", s))
	}
	mustRefuse(t, l, b.status(RootID, "agent-s", event.StatusActive), GateAuthority, "final")
}

func TestProductionIsDividedByShares(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(0), b.actor(RootID, "bob", event.Human, 0, func(r *event.ActorRecord) { r.Share = GenesisShare / 4 }))
	mustRefuse(t, l, b.produce(1, event.Credit{Actor: RootID, Amount: 101}), GateAuthority, "add up to 101")
	mustRefuse(t, l, b.produce(1, event.Credit{Actor: "agent-x", Amount: 1}), GateAuthority, "unknown actor")
	mustRefuse(t, l, b.produce(1, event.Credit{Actor: RootID, Amount: 100}), GateAuthority, "divided by the actors' shares")
	foldOn(t, l, b.produce(2, event.Credit{Actor: "bob", Amount: 50}, event.Credit{Actor: RootID, Amount: 150}))
	if l.Actors[RootID].Balance != 150 || l.Actors["bob"].Balance != 50 {
		t.Fatal("production not credited")
	}
	if err := l.Fold(l.Size+1, b.produce(1)); err == nil {
		t.Fatal("folded an event out of order")
	}
	if err := New().Fold(0, b.agent(RootID, "agent-x", 0)); err == nil {
		t.Fatal("a log that does not start with genesis")
	}
}

// Finding 8: a kill terminates, and terminated is final.
func TestKillIsFinal(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, governed(b)...)
	foldOn(t, l, b.ev(RootID, event.KindAgentKilled, func(e *event.Event) {
		e.Kill = &event.Kill{KillID: "019a5c3e-0000-7000-8000-00000000ffff", Agent: "agent-a", Reason: "manual", Revoked: []string{"env-a"}}
	}))
	if a := l.Actors["agent-a"]; a.Status != event.StatusTerminated || !l.Envelopes["env-a"].Revoked {
		t.Fatalf("after kill: %+v", a)
	}
	mustRefuse(t, l, b.status(RootID, "agent-a", event.StatusActive), GateAuthority, "terminated; that is final")
	mustRefuse(t, l, b.action("agent-a", "env-a", "workspace/x", 15), GateActor, "agent-a is terminated")
}

// The rule of every kind refuses a forged entry that breaks it, naming the
// gate: this is what `annald audit` reports.
func TestForgedEntriesAreRefusedByTheirRule(t *testing.T) {
	execPayload := func(out string) json.RawMessage {
		h := "sha256:" + strings.Repeat("a", 64)
		return json.RawMessage(`{"artifact_hash":"` + h + `","exit_code":0,"input_oid":"` + h + `","output_bytes":` + out + `,"output_oid":"` + h + `"}`)
	}
	for _, tc := range []struct {
		name   string
		before func(b *builder) []*event.Event
		forged func(b *builder) *event.Event
		gate   string
		want   string
	}{
		{"action after its envelope is revoked", func(b *builder) []*event.Event { return []*event.Event{b.revoke(RootID, "env-a")} },
			func(b *builder) *event.Event { return b.action("agent-a", "env-a", "workspace/x", 15) }, GateEnvelope, "env-a is revoked"},
		{"action of a frozen agent", func(b *builder) []*event.Event {
			return []*event.Event{b.status(RootID, "agent-a", event.StatusFrozen)}
		},
			func(b *builder) *event.Event { return b.action("agent-a", "env-a", "workspace/x", 15) }, GateActor, "agent-a is frozen"},
		{"action of a quarantined agent", func(b *builder) []*event.Event {
			return []*event.Event{b.ev(RootID, event.KindQuarantineStarted, func(e *event.Event) {
				e.Quarantine = &event.Quarantine{Agent: "agent-a", Reason: "manual", StartedAt: b.now(), ExpiresAt: b.now().Add(time.Hour)}
			})}
		}, func(b *builder) *event.Event { return b.action("agent-a", "env-a", "workspace/x", 15) }, GateQuarantine, "quarantined"},
		{"action outside the agent's grants", nil,
			func(b *builder) *event.Event { return b.action("agent-a", "env-a", "elsewhere/x", 15) }, GateBoundary, "outside agent-a's writable targets"},
		{"a cost that does not match the payload", nil, func(b *builder) *event.Event {
			return b.act("agent-a", "env-a", event.Action{Type: event.Execute, Target: "workspace/run", Payload: execPayload("1000000")}, 25)
		}, GateEnergy, "costs 3931"},
		{"an action with no envelope", nil,
			func(b *builder) *event.Event { return b.action("agent-a", "", "workspace/x", 15) }, GateEnvelope, "holds no live envelope"},
		{"a kill by another agent", nil, func(b *builder) *event.Event {
			return b.ev("agent-a", event.KindAgentKilled, func(e *event.Event) {
				e.Kill = &event.Kill{KillID: "019a5c3e-0000-7000-8000-00000000ffff", Agent: "agent-a", Reason: "manual"}
			})
		}, GateAuthority, "not a human"},
		{"energy produced by an actor", nil,
			func(b *builder) *event.Event {
				return b.ev(RootID, event.KindEnergyProduced, func(e *event.Event) { e.Production = &event.Production{Ticks: 1} })
			}, GateAuthority, "only the kernel produces energy"},
		{"a signal whose effect is not the rule's", nil, func(b *builder) *event.Event {
			return b.ev(RootID, event.KindSignalSent, func(e *event.Event) {
				e.Signal = &event.SignalRecord{Agent: "agent-a", Signal: "SIGKILL", Effect: event.EffectStop}
			})
		}, GateAuthority, "has effect terminate"},
		{"a mask set by an expired agent", func(b *builder) []*event.Event {
			return []*event.Event{b.actor(RootID, "agent-x", event.Agent, 0, func(r *event.ActorRecord) { r.Expires = b.now().Add(2 * time.Second) })}
		}, func(b *builder) *event.Event {
			b.clock = b.clock.Add(time.Minute)
			return b.ev("agent-x", event.KindSignalMasked, func(e *event.Event) { e.SignalMask = &event.SignalMask{Agent: "agent-x", Mask: []string{"SIGSTOP"}} })
		}, GateActor, "expired at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(t)
			l := fold(t, governed(b)...)
			if tc.before != nil {
				foldOn(t, l, tc.before(b)...)
			}
			mustRefuse(t, l, tc.forged(b), tc.gate, tc.want)
		})
	}
}

// A log of an older release folds: a rule introduced since, broken before
// the log adopted it, is counted and tolerated; once adopted, it holds.
func TestLegacyLogFoldsAndAdoptsTheRules(t *testing.T) {
	b := newBuilder(t)
	b.legacy = true
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-a", 1000), b.trust(RootID, "agent-a"),
		b.envelope(RootID, "env-a", "agent-a", "", 500), b.revoke(RootID, "env-a"))
	foldOn(t, l, b.action("agent-a", "env-a", "workspace/x", 15)) // the race the old kernel let through
	if l.Rules != RulesLegacy || l.Legacy != 1 || l.Actors["agent-a"].Balance != 985 {
		t.Fatalf("legacy fold: rules %d, tolerated %d, balance %d", l.Rules, l.Legacy, l.Actors["agent-a"].Balance)
	}
	// Inconsistencies were never tolerated.
	mustRefuse(t, l, b.action("agent-a", "env-a", "workspace/x", 5000), GateEnergy, "cannot settle")
	foldOn(t, l, b.ev(event.KernelActor, event.KindRulesAdopted, func(e *event.Event) {
		e.Log = &event.LogInfo{Origin: "example.com/test", Software: "test", Rules: Rules}
	}))
	mustRefuse(t, l, b.action("agent-a", "env-a", "workspace/y", 15), GateEnvelope, "env-a is revoked")
}

// The action rule's gates run in the documented order, by one loop.
func TestActionGatesRunInTheDocumentedOrder(t *testing.T) {
	var names []string
	for _, g := range ActionGates() {
		names = append(names, g[1])
	}
	// The order callers rely on (README, "Execution control"; a refusal
	// names the first gate that fails): written out here, so that a change
	// of the rule's gates is a change of this test too.
	documented := []string{GateActor, GateRateLimit, GateBoundary, GateEnvelope, GateQuarantine, GateSession,
		GateRing, GateResources, GatePolicy, GateHold, GateEnergy, GatePayload}
	if !slices.Equal(names, documented) || !slices.Equal(ActionGateOrder, documented) {
		t.Fatalf("the action rule runs %v, ActionGateOrder says %v, the documented order is %v", names, ActionGateOrder, documented)
	}
	for kind, r := range rules {
		if len(r.gates) == 0 || r.apply == nil {
			t.Errorf("kind %s has no gates or no apply", kind)
		}
	}
}

// Events the kernel may have in flight together commute: folding a batch of
// them in any order gives the same ledger. The claims of the others keep
// them apart (ledger.Claims).
func TestIndependentEventsCommute(t *testing.T) {
	b := newBuilder(t)
	prefix := []*event.Event{
		b.genesis(1_000_000), b.agent(RootID, "agent-a", 10_000), b.agent(RootID, "agent-b", 10_000),
		b.trust(RootID, "agent-a"), b.trust(RootID, "agent-b"),
		b.envelope(RootID, "env-a", "agent-a", "", 5_000, "workspace/held/*"), b.envelope(RootID, "env-b", "agent-b", "", 5_000),
		b.holdRequest("agent-a", "env-a", "hold-1", "workspace/held/x", 15, event.Instant{}),
	}
	batch := []*event.Event{
		b.action("agent-a", "env-a", "workspace/1", 15), b.act("agent-a", "env-a", event.Action{Type: event.Create, Target: "workspace/2"}, 10),
		b.action("agent-b", "env-b", "workspace/3", 15), b.produce(3, event.Credit{Actor: RootID, Amount: 300}),
		b.holdAnswer(RootID, "hold-1", event.HoldReject, 3),
		b.ev("agent-a", event.KindActionDenied, func(e *event.Event) {
			e.Action = &event.Action{Type: event.Mutate, Target: "system/x"}
			e.Decision = &event.Decision{Outcome: event.OutcomeDenied}
			e.Denial = &event.Denial{Stage: "validate", Reason: "privileged"}
		}),
	}
	for i, e := range batch {
		for j, o := range batch[i+1:] {
			if conflict(New().Claims(e), New().Claims(o)) {
				t.Fatalf("events %d and %d of the batch claim one object: they may not be in flight together", i, i+1+j)
			}
		}
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
	if a := l.Actors["agent-a"]; a.Balance != 10_000-15-10-3 || a.Reserved != 0 || l.Denials != 1 {
		t.Fatalf("agent-a %+v, denials %d", a, l.Denials)
	}
}

func conflict(a, b []Claim) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Key == y.Key && (x.Exclusive || y.Exclusive) {
				return true
			}
		}
	}
	return false
}

// A revoke claims its envelope, which every action under it (or under a
// sub-envelope of it) reads: the two are never in flight together.
func TestControlEventsClaimWhatActionsRead(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, append(governed(b), b.agent(RootID, "agent-c", 100), b.trust(RootID, "agent-c"),
		b.envelope("agent-a", "env-c", "agent-c", "env-a", 100))...)
	sub := b.action("agent-c", "env-c", "workspace/x", 15)
	for _, control := range []*event.Event{
		b.revoke(RootID, "env-a"),
		b.status(RootID, "agent-a", event.StatusFrozen),
		b.ev(RootID, event.KindQuarantineStarted, func(e *event.Event) {
			e.Quarantine = &event.Quarantine{Agent: "agent-a", Reason: "manual", StartedAt: b.now(), ExpiresAt: b.now().Add(time.Hour)}
		}),
	} {
		if !conflict(l.Claims(sub), l.Claims(control)) {
			t.Errorf("%s does not claim what an action under a delegated envelope reads", control.Kind)
		}
	}
}

func TestPersistRoundTrip(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(1000), b.agent(RootID, "agent-a", 300), b.trust(RootID, "agent-a"),
		b.envelope(RootID, "env-1", "agent-a", "", 100, "workspace/h/*"),
		b.holdRequest("agent-a", "env-1", "hold-1", "workspace/h/x", 15, event.Instant{}), b.action("agent-a", "env-1", "workspace/y", 15))
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
	foldOn(t, back, b.holdAnswer(RootID, "hold-1", event.HoldReject, 3))
	if _, err := Load(map[string][]byte{"bogus/x": []byte("{}")}); err == nil {
		t.Fatal("unknown key loaded")
	}
}

// An envelope's chain is kept once it is issued (and once a stored state
// is loaded): what Chain returns is what walking up the parents finds, and
// a change to an ancestor, here a revocation, shows through it.
func TestChainKeptAgreesWithTheWalk(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-p", 500), b.agent(RootID, "agent-c", 500),
		b.agent(RootID, "agent-g", 500), b.trust(RootID, "agent-p"), b.trust(RootID, "agent-c"), b.trust(RootID, "agent-g"),
		b.envelope(RootID, "env-p", "agent-p", "", 100), b.envelope("agent-p", "env-c", "agent-c", "env-p", 50),
		b.envelope("agent-c", "env-g", "agent-g", "env-c", 20))
	stored := map[string][]byte{}
	for _, key := range l.Keys() {
		if v, ok := l.Encode(key); ok {
			stored[key] = v
		}
	}
	loaded, err := Load(stored)
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*Ledger{"folded": l, "loaded": loaded} {
		chain, v := l.Chain("env-g")
		walked, wv := l.walkChain("env-g")
		if v != nil || wv != nil || len(chain) != 3 || !slices.Equal(chain, walked) {
			t.Fatalf("%s: Chain(env-g) = %v, %v; walked %v, %v", name, chain, v, walked, wv)
		}
		if l.Envelopes["env-g"].chain == nil {
			t.Fatalf("%s: env-g's chain is not kept", name)
		}
		if _, v := l.Chain("env-none"); v == nil {
			t.Fatalf("%s: the chain of an envelope that does not exist", name)
		}
		foldOn(t, l, b.revoke(RootID, "env-p"))
		if chain, _ := l.Chain("env-g"); !chain[2].Revoked {
			t.Fatalf("%s: the parent's revocation does not show in the kept chain", name)
		}
		mustRefuse(t, l, b.action("agent-g", "env-g", "workspace/g", 1), GateEnvelope, "env-p is revoked")
	}
}

// Every gate is described once, in a stage of the pipeline, and every gate
// of every rule runs in the stage its description gives.
func TestEveryGateIsDescribedOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range Gates() {
		if seen[g.Name] {
			t.Errorf("gate %s is described twice", g.Name)
		}
		seen[g.Name] = true
		if g.Checks == "" || !slices.Contains([]string{StageValidate, StageReserve, StageValidatePayload}, g.Stage) {
			t.Errorf("gate %s: stage %q, checks %q", g.Name, g.Stage, g.Checks)
		}
	}
	for kind, r := range rules {
		for _, g := range r.gates {
			if !seen[g.name] || gateStage[g.name] != g.stage {
				t.Errorf("kind %s: gate %s runs in stage %s, described in %q", kind, g.name, g.stage, gateStage[g.name])
			}
		}
	}
}

// Every kind of event has its rule, and every rule is for a kind the
// event format knows: each concept file adds the rows of its kinds.
func TestEveryKindHasARule(t *testing.T) {
	for _, kind := range event.Kinds() {
		if rules[kind] == nil {
			t.Errorf("kind %s has no rule", kind)
		}
	}
	if len(rules) != len(event.Kinds()) {
		t.Errorf("%d rules for %d kinds", len(rules), len(event.Kinds()))
	}
}

// The refusals recorded as action.denied are those of well-formed actions
// at the gates auditors should see; form and rate-limit refusals are not
// (a flood the limit refuses must not fill the log).
func TestRecordedGates(t *testing.T) {
	want := []string{GateActor, GateBoundary, GateEnvelope, GateQuarantine, GateSession, GateRing, GateResources, GatePolicy, GateHold, GateEnergy}
	var got []string
	for _, g := range Gates() {
		if g.Recorded != Recorded(g.Name) {
			t.Errorf("Recorded(%s) disagrees with the gate table", g.Name)
		}
		if g.Recorded {
			got = append(got, g.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("recorded gates %v, want %v", got, want)
	}
	if Recorded(GateForm) || Recorded(GateRateLimit) || Recorded("no-such-gate") {
		t.Fatal("a form, rate-limit or unknown gate's refusal is recorded")
	}
}
