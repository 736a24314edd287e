package kernel

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
)

// Finding 1: with many clients acting as one agent, a human revokes its
// envelope, freezes, quarantines, stops or kills it. Log order must be
// decision order: no action of that agent (or under that envelope) may
// come after the control event in the log, and the fold must agree.
func TestAttack_ActionsAfterControl(t *testing.T) {
	const clients = 64
	rounds := 100
	if testing.Short() {
		rounds = 10
	} else if raceEnabled {
		rounds = 30 // .ci/run runs the 100 rounds without the race detector
	}
	g := openGov(t, func(c *Config) { c.BatchMaxSize, c.BatchMaxAge = 512, 2*time.Millisecond })
	ctx := context.Background()
	controls := []struct {
		name string
		do   func(a *Actor, env string) error
	}{
		{"revoke", func(_ *Actor, env string) error { _, err := g.RevokeEnvelope(ctx, g.root, env, "race"); return err }},
		{"freeze", func(a *Actor, _ string) error {
			_, err := g.SetStatus(ctx, g.root, a.ID, event.StatusFrozen, "race")
			return err
		}},
		{"quarantine", func(a *Actor, _ string) error {
			_, _, err := g.Quarantine(ctx, g.root, a.ID, QuarantineRequest{Reason: "manual", Duration: time.Hour})
			return err
		}},
		{"stop", func(a *Actor, _ string) error {
			_, _, err := g.Signal(ctx, g.root, a.ID, "SIGSTOP", "race")
			return err
		}},
		{"kill", func(a *Actor, _ string) error {
			_, _, err := g.Kill(ctx, g.root, a.ID, KillRequest{Reason: "manual"})
			return err
		}},
	}
	committed := 0
	for round := range rounds {
		c := controls[round%len(controls)]
		a, _ := g.agent(1<<30, "workspace/**:mutate")
		env := g.envelope(g.root, EnvelopeRequest{Holder: a.ID, Budget: 1 << 30, Grants: grants("workspace/**:mutate")})
		start := g.size()
		var wg sync.WaitGroup
		var acted atomic.Int64
		for w := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 { // bounded: each client stops at its first refusal
					_, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: fmt.Sprintf("workspace/%d/%d/%d", round, w, i), Envelope: env.ID})
					if err != nil {
						return
					}
					acted.Add(1)
				}
			}()
		}
		for acted.Load() < clients { // let the clients get going
			time.Sleep(100 * time.Microsecond)
		}
		if err := c.do(a, env.ID); err != nil {
			t.Fatalf("round %d: %s: %v", round, c.name, err)
		}
		wg.Wait()
		committed += int(acted.Load())
		controlAt, after := -1, 0
		for i := start; i < g.size(); i++ {
			entry, err := g.Entry(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := event.Parse(entry)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case controlAt < 0 && ev.Actor == g.root.ID && ev.Kind != event.KindActorCreated && ev.Kind != event.KindEnvelopeIssued:
				controlAt = int(i)
			case controlAt >= 0 && ev.Kind == event.KindAction && ev.Actor == a.ID:
				after++
			}
		}
		if controlAt < 0 || after > 0 {
			t.Fatalf("round %d (%s): control event at %d, %d actions of %s after it in the log", round, c.name, controlAt, after, a.ID)
		}
	}
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed != nil {
		t.Fatalf("the kernel logged an event its fold refused: %v", failed)
	}
	t.Logf("%d rounds of %d clients, %d actions committed; none after its control event", rounds, clients, committed)
}

// The order the README documents for an action's gates is the order the
// action rule's loop runs them.
func TestREADMEDocumentsTheActionGateOrder(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "    " + strings.Join(ActionGateOrder, " → ") + "\n"
	if !strings.Contains(string(readme), want) {
		t.Fatalf("README.md does not document the gate order %q", strings.TrimSpace(want))
	}
}
