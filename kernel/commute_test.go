package kernel

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
	"golang.org/x/mod/sumdb/note"
)

// The claims' second machine check. The ledger's claims check (in every
// test binary) sees what an apply changes; what a decision reads it cannot
// see. So this one asks what claims promise of reads: two events that a
// state allows and whose claims do not conflict may be in flight together
// and folded in either order, so each must still be allowed once the other
// is folded. It takes the events of a real log with every kind the kernel
// writes (a script of each operation, then a race of them), and checks each
// pair of nearby events against the ledger before them.

// everyKindLog runs a kernel through every operation that writes an event
// — once by script, then racing — and returns the events of its log.
func everyKindLog(t *testing.T) []*event.Event {
	t.Helper()
	g := openGov(t, func(c *Config) { c.BatchMaxSize, c.BatchMaxAge = 64, 5*time.Millisecond })
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	a := g.ringAgent(ptr(0.9), false, "workspace/**:observe,create,mutate", "tools/**:execute", "sessions/**:mutate")
	b := g.ringAgent(ptr(0.9), false, "workspace/**:observe,create,mutate", "sessions/**:mutate")
	env := g.envelope(g.root, EnvelopeRequest{Holder: a.ID, Budget: 1 << 20, Grants: grants("workspace/**:create,mutate", "tools/**:execute"),
		HoldOn: grants("workspace/held/*:mutate")})
	g.envelope(a, EnvelopeRequest{Holder: b.ID, Parent: env.ID, Budget: 1000, Grants: grants("workspace/b/**:mutate")})
	revoked := g.envelope(g.root, EnvelopeRequest{Holder: b.ID, Budget: 10, Grants: grants("workspace/**:mutate")})
	_, err := g.RevokeEnvelope(ctx, g.root, revoked.ID, "script")
	must("revoke", err)
	_, err = g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "workspace/a"})
	must("action", err)
	_, err = g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "system/x"})
	if err == nil {
		t.Fatal("a denied action was committed")
	}
	for _, decision := range []string{event.HoldApprove, event.HoldReject} {
		rc, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "workspace/held/" + decision, Envelope: env.ID})
		must("hold", err)
		_, err = g.AnswerHold(ctx, g.root, rc.HoldID, decision, "script")
		must("answer", err)
	}
	in, err := g.Submit(ctx, a, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: intentPayload(oidOf('a')), Envelope: env.ID})
	must("intent", err)
	_, err = g.Submit(ctx, a, ActionRequest{Type: event.Execute, Target: "tools/build", Payload: resultPayload(in.Index, oidOf('a'), 100)})
	must("result", err)
	_, err = g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "workspace/sealed", Payload: []byte(`{"name":"x"}`), Seal: true, Subject: "customer-1"})
	must("sealed action", err)
	_, err = g.EraseSubject(ctx, g.root, "customer-1", EraseRequest{Reason: "script"})
	must("erase", err)
	_, err = g.ConfigureRings(ctx, g.root, []string{"api.example.com"})
	must("rings", err)
	_, err = g.RegisterAction(ctx, g.root, ring.Descriptor{ActionID: "edit", Name: "edit", ExecuteAPI: "/edit", Reversibility: ring.Full}, grants("workspace/**:mutate"))
	must("descriptor", err)
	_, err = g.SetSignalMask(ctx, a, []string{"SIGINT"})
	must("mask", err)
	_, elevation, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: b.ID, Ring: 1, TTL: time.Minute, Reason: "script"})
	must("elevation", err)
	_, err = g.RevokeElevation(ctx, g.root, elevation.ID, "script")
	must("end the elevation", err)
	_, err = g.SetStatus(ctx, g.root, b.ID, event.StatusFrozen, "script")
	must("freeze", err)
	_, err = g.SetStatus(ctx, g.root, b.ID, event.StatusActive, "script")
	must("unfreeze", err)
	g.produce(ctx, false) // one tick, then a forced production
	g.produce(ctx, true)
	rc := session.DefaultConfig()
	g.activeSession("script", rc, a, b)
	_, _, err = g.StartSaga(ctx, a, "saga-script", "script", []saga.StepSpec{saga.NewStepSpec("one", "x", "y")})
	must("saga", err)
	_, err = g.ReportSagaStep(ctx, a, "saga-script", SagaReport{Step: "one", Transition: event.SagaStart})
	must("saga step", err)
	// Pairs that claims must keep apart, each written one right after the
	// other, so that the pair check sees both decidable on the state
	// before them. A kill hands a saga step to a substitute, who is then
	// frozen:
	doomed := g.ringAgent(ptr(0.9), false, "sessions/**:mutate")
	substitute := g.ringAgent(ptr(0.9), false, "sessions/**:mutate")
	g.activeSession("handoff", rc, doomed, substitute)
	g.changeSession(g.root, "handoff", SessionChange{Op: event.SessionOpSubstitute, Agent: substitute.ID})
	_, _, err = g.StartSaga(ctx, doomed, "saga-handoff", "handoff", []saga.StepSpec{saga.NewStepSpec("one", "x", "y")})
	must("saga", err)
	_, err = g.ReportSagaStep(ctx, doomed, "saga-handoff", SagaReport{Step: "one", Transition: event.SagaStart})
	must("saga step", err)
	_, kill, err := g.Kill(ctx, g.root, doomed.ID, KillRequest{Reason: "manual", Session: "handoff"})
	must("kill", err)
	if len(kill.Handoffs) != 1 || kill.Handoffs[0].To != substitute.ID {
		t.Fatalf("the kill handed off %+v", kill.Handoffs)
	}
	_, err = g.SetStatus(ctx, g.root, substitute.ID, event.StatusFrozen, "script")
	must("freeze the substitute", err)
	// A human approves a hold of its agent, and then must sign:
	na, err := g.CreateAgent(ctx, g.root, ActorRequest{Kind: event.Human, Name: "overseer", Purpose: "p", Energy: 10_000, Grants: grants("workspace/**:mutate")})
	must("human", err)
	human, _ := g.Authenticate(na.Credential)
	na, err = g.CreateAgent(ctx, human, ActorRequest{Name: "c", Purpose: "p", Energy: 1000, Grants: grants("workspace/**:mutate"), Trust: ptr(0.9)})
	must("agent of the human", err)
	c, _ := g.Authenticate(na.Credential)
	cHeld := g.envelope(human, EnvelopeRequest{Holder: c.ID, Budget: 1000, Grants: grants("workspace/**:mutate"), HoldOn: grants("workspace/held/*:mutate")})
	held, err := g.Submit(ctx, c, ActionRequest{Type: event.Mutate, Target: "workspace/held/by-human", Envelope: cHeld.ID})
	must("hold", err)
	if held.HoldID == "" {
		t.Fatalf("not held: %+v", held)
	}
	_, err = g.AnswerHold(ctx, human, held.HoldID, event.HoldApprove, "script")
	must("approve", err)
	_, humanKey, err := note.GenerateKey(rand.Reader, "human")
	must("key", err)
	_, err = g.SetSigningKey(ctx, g.root, human.ID, SigningKeyRequest{Key: humanKey, RequireSigned: true, Reason: "script"})
	must("require signed", err)
	// A human with a share of 1 gives it, and then gives energy:
	giver := g.human(1)
	_, err = g.CreateAgent(ctx, giver, ActorRequest{Name: "heir", Purpose: "p", Share: ptr[uint64](1)})
	must("give the share", err)
	raceEveryKind(t, g, 6, 40)
	// Whether the race ends a quarantine is chance: one ends here for sure.
	quarantined := g.ringAgent(ptr(0.9), false, "workspace/**:observe")
	_, _, err = g.Quarantine(ctx, g.root, quarantined.ID, QuarantineRequest{Reason: "manual", Duration: time.Minute})
	must("quarantine", err)
	_, err = g.Release(ctx, g.root, quarantined.ID, "", "script")
	must("release", err)
	_, _, err = g.CreateSession(ctx, g.root, "", session.DefaultConfig())
	must("session", err)
	_, _, err = g.StartSaga(ctx, a, "saga-late", "", []saga.StepSpec{saga.NewStepSpec("one", "x", "y")})
	_ = err // a may have been killed by the race

	size := g.size()
	events := make([]*event.Event, size)
	for i := range size {
		entry, err := g.Entry(ctx, i)
		must("entry", err)
		if events[i], err = event.Parse(entry); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	return events
}

// conflicts reports whether two claim sets may not be in flight together.
func conflicts(a, b []ledger.Claim) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Key == y.Key && (x.Exclusive || y.Exclusive) {
				return true
			}
		}
	}
	return false
}

// commuteCheck checks the pair (e1, e2) on l (the ledger before both):
// if l allows both as decided together (each with the other's energy held)
// and their claims do not conflict, each must still be allowed once the
// other is folded. It returns what went wrong, or "".
func commuteCheck(l *ledger.Ledger, e1, e2 *event.Event) string {
	c1, c2 := l.Claims(e1), l.Claims(e2)
	if conflicts(c1, c2) || (!slices.ContainsFunc(c1, isExclusive) && !slices.ContainsFunc(c2, isExclusive)) {
		return "" // kept apart, or both only read: nothing to check
	}
	holding := func(other *event.Event) ledger.Options {
		p := ledger.NewPending()
		p.Hold(l.Draw(other))
		return ledger.Options{Pending: p}
	}
	if l.Check(e1, holding(e2)) != nil || l.Check(e2, holding(e1)) != nil {
		return "" // not decidable together on this state
	}
	for _, order := range [][2]*event.Event{{e1, e2}, {e2, e1}} {
		first, second := order[0], order[1]
		after := l.Clone()
		after.CheckClaims()
		if err := after.Fold(after.Size, first); err != nil {
			return fmt.Sprintf("%s by %s does not fold alone: %v", first.Kind, first.Actor, err)
		}
		if err := after.Check(second, ledger.Options{}); err != nil {
			return fmt.Sprintf("%s by %s (claims %v) was allowed beside %s by %s (claims %v), whose claims do not conflict with it, "+
				"but once that is folded it is refused: %v", second.Kind, second.Actor, l.Claims(second), first.Kind, first.Actor, l.Claims(first), err)
		}
	}
	return ""
}

func isExclusive(c ledger.Claim) bool { return c.Exclusive }

// commuteWindow is how many events after a prefix the check pairs up:
// later ones mostly depend on what comes between.
const commuteWindow = 8

// TestClaims_NonConflictingDecisionsCommute runs commuteCheck on every
// pair of events within commuteWindow of each other in a log of every
// kind, against the ledger of the log before them (under the race detector,
// at every 8th prefix: .ci/run runs it whole without).
func TestClaims_NonConflictingDecisionsCommute(t *testing.T) {
	events := everyKindLog(t)
	kinds := map[event.Kind]bool{}
	for _, ev := range events {
		kinds[ev.Kind] = true
	}
	for _, k := range event.Kinds() {
		if !kinds[k] && k != event.KindRulesAdopted && k != event.KindTolerated {
			t.Errorf("the log of every kind has no %s: extend everyKindLog's script", k)
		}
	}
	l := ledger.New()
	l.CheckClaims()
	stride := 1
	if raceEnabled {
		stride = 8
	}
	checked := 0
	for p := range events {
		for i := p; p > 0 && p%stride == 0 && i < min(len(events), p+commuteWindow); i++ {
			for j := i + 1; j < min(len(events), p+commuteWindow); j++ {
				if msg := commuteCheck(l, events[i], events[j]); msg != "" {
					t.Fatalf("at entry %d: %s", p, msg)
				}
				checked++
			}
		}
		if err := l.Fold(l.Size, events[p]); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d events of %d kinds, %d pairs checked", len(events), len(kinds), checked)
}

var everyKind struct {
	once   sync.Once
	events []*event.Event
	states []*ledger.Ledger // the ledger before every 16th event
}

// FuzzClaimsCommute runs commuteCheck on pairs of events of the log of
// every kind that the fuzzer picks, against the ledger at a prefix it picks.
func FuzzClaimsCommute(f *testing.F) {
	f.Add(uint16(40), uint8(1), uint8(2))
	f.Add(uint16(100), uint8(0), uint8(5))
	f.Add(uint16(7), uint8(3), uint8(30))
	f.Fuzz(func(t *testing.T, prefix uint16, di, dj uint8) {
		everyKind.once.Do(func() {
			everyKind.events = everyKindLog(t)
			l := ledger.New()
			for i, ev := range everyKind.events {
				if i%16 == 0 {
					everyKind.states = append(everyKind.states, l.Clone())
				}
				if err := l.Fold(l.Size, ev); err != nil {
					t.Fatal(err)
				}
			}
		})
		events := everyKind.events
		p := 1 + int(prefix)%(len(events)-1) // after the genesis
		l := everyKind.states[p/16].Clone()
		for _, ev := range events[l.Size:p] {
			if err := l.Fold(l.Size, ev); err != nil {
				t.Fatal(err)
			}
		}
		i, j := p+int(di)%64, p+int(dj)%64
		if i == j || i >= len(events) || j >= len(events) {
			return
		}
		if msg := commuteCheck(l, events[i], events[j]); msg != "" {
			t.Fatalf("at entry %d: %s", p, msg)
		}
	})
}
