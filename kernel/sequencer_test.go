package kernel

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
	"golang.org/x/mod/sumdb/note"
)

// raceEveryKind has workers race decisions of every kind at a few agents,
// one human with a small share, one session and a few sagas, so that
// decisions that do not commute are taken together wherever the claims let
// them. Whatever is refused, the kernel must never log an event its own
// fold refuses (it would stop), and openGov's cleanup checks that the
// state equals a replay of the log. It returns the successful decisions by
// operation.
func raceEveryKind(t *testing.T, g *govKernel, workers, rounds int) map[string]int {
	t.Helper()
	ctx := context.Background()
	var agents []*Actor
	for range 5 {
		agents = append(agents, g.ringAgent(ptr(0.9), false, "workspace/**:mutate", "sessions/**:mutate"))
	}
	human := g.human(3)
	_, humanKey, err := note.GenerateKey(rand.Reader, "human")
	if err != nil {
		t.Fatal(err)
	}
	held := g.envelope(g.root, EnvelopeRequest{Holder: agents[0].ID, Budget: 1 << 20, Grants: grants("workspace/**:mutate"),
		HoldOn: grants("workspace/held/*:mutate")})
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
	done := map[string]int{}
	count := func(op string, err error) {
		var den *Denial
		if errors.As(err, &den) && errors.Is(den, logstore.ErrUnavailable) {
			t.Errorf("%s: %v", op, err) // the kernel never stops in this race
		}
		if err == nil {
			mu.Lock()
			done[op]++
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(uint64(w), 7))
			for i := range rounds {
				ai := rng.IntN(len(agents))
				a := agents[ai]
				other := agents[rng.IntN(len(agents))]
				switch rng.IntN(20) {
				case 0, 1:
					_, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: fmt.Sprintf("sessions/s/%d/%d", w, i), Session: "s"})
					count("action", err)
				case 2:
					_, _, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: a.ID, Ring: 1, TTL: time.Duration(1+rng.IntN(2)) * time.Second, Reason: "race"})
					count("elevation", err)
				case 3:
					if v := g.Rings(g.root)[rng.IntN(len(agents))]; len(v.Elevations) > 0 && rng.IntN(3) == 0 {
						_, err := g.RevokeElevation(ctx, g.root, v.Elevations[0].ID, "race")
						count("elevation.ended", err)
					}
				case 4:
					if rng.IntN(3) == 0 {
						_, _, err := g.Quarantine(ctx, g.root, a.ID, QuarantineRequest{Reason: "manual", Duration: time.Second, Session: []string{"", "s"}[rng.IntN(2)]})
						count("quarantine", err)
					}
				case 5:
					g.Release(ctx, g.root, a.ID, "", "race")
					g.Release(ctx, g.root, a.ID, "s", "race")
				case 6:
					_, err := g.AssignRing(ctx, g.root, a.ID, RingAssignment{Trust: []float64{0.5, 0.7, 0.9, 0.97}[rng.IntN(4)], Consensus: rng.IntN(2) == 0})
					count("ring", err)
				case 7:
					_, _, err := g.AppendDelta(ctx, a, "s", DeltaRequest{TurnID: fmt.Sprintf("t-%d-%d", w, i), Changes: []delta.Change{{Path: fmt.Sprintf("f-%d-%d", w, i), Operation: delta.OpCreate, ContentHash: oid('a')}}})
					count("delta", err)
				case 8:
					id := fmt.Sprint("saga-", ai)
					tr := []string{event.SagaStart, event.SagaSucceeded, event.SagaFailed, event.SagaCompensating, event.SagaCompensated}[rng.IntN(5)]
					_, err := g.ReportSagaStep(ctx, a, id, SagaReport{Step: []string{"one", "two"}[rng.IntN(2)], Transition: tr})
					count("saga.step", err)
				case 9:
					_, _, err := g.Signal(ctx, g.root, a.ID, []string{"SIGSTOP", "SIGCONT", "SIGCONT", "SIGINT"}[rng.IntN(4)], "race")
					count("signal", err)
				case 10:
					_, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "quiet", Agent: a.ID, Detach: rng.IntN(2) == 0})
					count("policy", err)
				case 11:
					_, err := g.ChangeSession(ctx, g.root, "s", SessionChange{Op: event.SessionOpSubstitute, Agent: other.ID})
					count("session", err)
				case 12:
					if rng.IntN(40) == 0 {
						_, _, err := g.Kill(ctx, g.root, a.ID, KillRequest{Reason: "manual", Session: "s"})
						count("kill", err)
					}
				case 13:
					g.clock.advance(300 * time.Millisecond) // expiries pass before the kernel records them
				case 14:
					g.expireControl(ctx)
				case 15:
					// The human's share of 3 is given away once, whatever the race.
					_, err := g.CreateAgent(ctx, human, ActorRequest{Name: "child", Purpose: "race", Share: ptr[uint64](1)})
					count("create.share", err)
				case 16:
					status := []string{event.StatusFrozen, event.StatusActive}[rng.IntN(2)]
					_, err := g.SetStatus(ctx, g.root, a.ID, status, "race")
					count("status", err)
				case 17:
					// A held action of the first agent, answered by the human
					// while root changes whether the human must sign.
					rc, err := g.Submit(ctx, agents[0], ActionRequest{Type: event.Mutate, Target: fmt.Sprintf("workspace/held/%d-%d", w, i), Envelope: held.ID})
					count("hold", err)
					if err == nil && rc.HoldID != "" {
						_, err := g.AnswerHold(ctx, []*Actor{human, g.root}[rng.IntN(2)], rc.HoldID, []string{event.HoldApprove, event.HoldReject}[rng.IntN(2)], "race")
						count("hold.answer", err)
					}
				case 18:
					_, err := g.SetSigningKey(ctx, g.root, human.ID, SigningKeyRequest{Key: humanKey, RequireSigned: rng.IntN(2) == 0, Reason: "race"})
					count("key", err)
				case 19:
					_, err := g.Submit(ctx, agents[0], ActionRequest{Type: event.Mutate, Target: fmt.Sprintf("workspace/%d-%d", w, i), Envelope: held.ID})
					count("envelope.action", err)
				}
			}
		}()
	}
	wg.Wait()
	g.mu.Lock()
	failed := g.failed
	g.mu.Unlock()
	if failed != nil {
		t.Fatalf("the kernel logged an event its fold refused: %v", failed)
	}
	if got := g.Actors(g.root); len(got) == 0 {
		t.Fatal("no actors")
	}
	children := 0
	for _, a := range g.Actors(human) {
		if a.Creator == human.ID && a.Share > 0 {
			children++
		}
	}
	if children > 3 {
		t.Fatalf("the human with a share of 3 gave a share of 1 to %d agents", children)
	}
	return done
}

// human creates a human with a share of production, authenticated.
func (g *govKernel) human(share uint64) *Actor {
	g.t.Helper()
	na, err := g.CreateAgent(context.Background(), g.root, ActorRequest{Kind: event.Human, Name: "h", Purpose: "test", Share: &share,
		Grants: grants("workspace/**:observe,create,mutate,execute", "sessions/**:observe,create,mutate,execute")})
	if err != nil {
		g.t.Fatal(err)
	}
	a, err := g.Authenticate(na.Credential)
	if err != nil {
		g.t.Fatal(err)
	}
	return a
}

// Concurrent decisions of every kind, with claims: the claims keep apart
// every two decisions that do not commute, so the sequencer keeps nothing
// out of the log (in a test binary, an entry it did keep out fails the
// test: ledger.MissedClaim), and no event is folded that its claims did
// not cover (the ledger's claims check).
func TestConcurrentControlDecisionsFoldInAnyOrder(t *testing.T) {
	g := openGov(t, func(c *Config) { c.BatchMaxSize, c.BatchMaxAge = 64, 5*time.Millisecond })
	done := raceEveryKind(t, g, 12, 100)
	if n := g.SequencerRefusals(); n != 0 {
		t.Fatalf("the sequencer kept %d entries out of the log: a claim is missing", n)
	}
	t.Logf("successful decisions by kind: %v", done)
}

// TestSequencer_KeepsTheLogFoldableWithoutClaims: with no claims at all,
// any two decisions are in flight together, and many are taken on a state
// that an event in flight changes. The sequencer alone keeps every one of
// them out of the log and has it decided again: the kernel never stops,
// and the state equals a replay of the log.
func TestSequencer_KeepsTheLogFoldableWithoutClaims(t *testing.T) {
	g := openGov(t, func(c *Config) {
		c.claimsOff = true
		c.BatchMaxSize, c.BatchMaxAge = 64, 5*time.Millisecond
	})
	done := raceEveryKind(t, g, 12, 100)
	if g.SequencerRefusals() == 0 {
		t.Fatal("the sequencer kept nothing out of the log: the race without claims proved nothing")
	}
	t.Logf("kept out and decided again: %d; successful decisions by kind: %v", g.SequencerRefusals(), done)
}
