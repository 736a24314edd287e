package kernel

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
)

// Concurrent execution control: goroutines race every kind of control
// decision and actions at the same agents, sessions and sagas, so that
// Tessera batches them together in any order. Whatever is refused, the
// kernel never logs an event its own fold refuses (it would stop), and
// the state equals a replay of the log (openGov's cleanup).
func TestConcurrentControlDecisionsFoldInAnyOrder(t *testing.T) {
	g := openGov(t, func(c *Config) { c.BatchMaxSize, c.BatchMaxAge = 64, 5*time.Millisecond })
	ctx := context.Background()
	var agents []*Actor
	for range 6 {
		agents = append(agents, g.ringAgent(ptr(0.9), false, "workspace/**:mutate", "sessions/**:mutate"))
	}
	if _, err := g.SetPolicy(ctx, g.root, policy.Policy{Name: "quiet", BlockedPatterns: []string{"secret"}}); err != nil {
		t.Fatal(err)
	}
	rc := session.DefaultConfig()
	rc.Isolation = session.ReadCommitted
	g.activeSession("s", rc, agents...)
	for i, a := range agents {
		if _, _, err := g.StartSaga(ctx, a, fmt.Sprint("saga-", i), "s", []saga.StepSpec{saga.NewStepSpec("one", "x", "y"), saga.NewStepSpec("two", "x", "y")}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	done := map[int]int{}
	count := func(op int, err error) {
		if err == nil {
			mu.Lock()
			done[op]++
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 60 {
				ai := rng.IntN(len(agents))
				a := agents[ai]
				other := agents[rng.IntN(len(agents))]
				switch rng.IntN(15) {
				case 0, 1:
					_, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: fmt.Sprintf("sessions/s/%d/%d", w, i), Session: "s"})
					count(0, err)
				case 2:
					_, _, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: a.ID, Ring: 1, TTL: time.Duration(1+rng.IntN(2)) * time.Second, Reason: "race"})
					count(2, err)
				case 3:
					if v := g.Rings(g.root)[rng.IntN(len(agents))]; len(v.Elevations) > 0 && rng.IntN(3) == 0 {
						_, err := g.RevokeElevation(ctx, g.root, v.Elevations[0].ID, "race")
						count(3, err)
					}
				case 4:
					if rng.IntN(3) == 0 {
						g.Quarantine(ctx, g.root, a.ID, QuarantineRequest{Reason: "manual", Duration: time.Second, Session: []string{"", "s"}[rng.IntN(2)]})
					}
				case 5:
					g.Release(ctx, g.root, a.ID, "", "race")
					g.Release(ctx, g.root, a.ID, "s", "race")
				case 6:
					g.AssignRing(ctx, g.root, a.ID, RingAssignment{Trust: []float64{0.5, 0.7, 0.9, 0.97}[rng.IntN(4)], Consensus: rng.IntN(2) == 0})
				case 7:
					_, _, err := g.AppendDelta(ctx, a, "s", DeltaRequest{TurnID: fmt.Sprintf("t-%d-%d", w, i), Changes: []delta.Change{{Path: fmt.Sprintf("f-%d-%d", w, i), Operation: delta.OpCreate, ContentHash: oid('a')}}})
					count(7, err)
				case 8:
					id := fmt.Sprint("saga-", ai)
					tr := []string{event.SagaStart, event.SagaSucceeded, event.SagaFailed, event.SagaCompensating, event.SagaCompensated}[rng.IntN(5)]
					_, err := g.ReportSagaStep(ctx, a, id, SagaReport{Step: []string{"one", "two"}[rng.IntN(2)], Transition: tr})
					count(8, err)
				case 9:
					g.Signal(ctx, g.root, a.ID, []string{"SIGSTOP", "SIGCONT", "SIGCONT", "SIGINT"}[rng.IntN(4)], "race")
				case 10:
					g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "quiet", Agent: a.ID, Detach: rng.IntN(2) == 0})
				case 11:
					g.ChangeSession(ctx, g.root, "s", SessionChange{Op: event.SessionOpSubstitute, Agent: other.ID})
				case 12:
					if rng.IntN(40) == 0 {
						_, _, err := g.Kill(ctx, g.root, a.ID, KillRequest{Reason: "manual", Session: "s"})
						count(12, err)
					}
				case 13:
					g.clock.advance(300 * time.Millisecond) // expiries pass before the kernel records them
				case 14:
					g.expireControl(ctx)
				}
			}
		}()
	}
	wg.Wait()
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed != nil {
		size, _ := g.log.size(ctx)
		for i := uint64(0); i < size; i++ {
			entry, err := g.log.readEntry(ctx, i)
			if err == nil && (strings.Contains(string(entry), "elev") || strings.Contains(string(entry), "agent.ring")) {
				t.Logf("%d: %s", i, entry)
			}
		}
		t.Fatalf("the kernel logged an event its fold refused: %v", failed)
	}
	t.Logf("successful decisions by kind: %v", done)
}
