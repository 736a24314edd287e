package kernel

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
)

// Replay reproduces every ring, elevation, quarantine, session, delta
// chain, saga, policy and signal state: the live ledger, the ledger
// stored in bbolt and reloaded on restart, and a fresh fold of the log
// (with the state file deleted) are the same, byte for byte.
func TestReplayReproducesExecutionControlState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	clk := &clock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	cfg.Now = clk.Now
	cfg.Energy.Genesis = 1 << 40
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &govKernel{Kernel: k, t: t, root: rootOf(t, k), clock: clk}
	a := g.ringAgent(ptr(0.9), false, "workspace/**:mutate")
	b := g.ringAgent(ptr(0.97), true, "workspace/**:mutate")
	c := g.ringAgent(nil, false)
	if _, err := g.AssignRing(ctx, g.root, c.ID, RingAssignment{Trust: 0.7, Ring: ptr(3), Reason: "probation"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ConfigureRings(ctx, g.root, []string{"api.example.com"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.RegisterAction(ctx, g.root, ring.Descriptor{ActionID: "pay", Name: "pay", ExecuteAPI: "/pay", Reversibility: ring.None}, grants("payments/**:mutate")); err != nil {
		t.Fatal(err)
	}
	_, expiring, err := g.RequestElevation(ctx, g.root, ElevationRequest{Agent: a.ID, Ring: 1, TTL: time.Minute, Reason: "r"})
	if err != nil {
		t.Fatal(err)
	}
	rc := session.DefaultConfig()
	rc.Isolation = session.ReadCommitted
	g.activeSession("alpha", rc, a, b)
	g.activeSession("beta", session.DefaultConfig(), a)
	g.changeSession(g.root, "alpha", SessionChange{Op: event.SessionOpGrant, Granted: "beta"})
	g.changeSession(g.root, "alpha", SessionChange{Op: event.SessionOpSubstitute, Agent: b.ID})
	if _, _, err := g.RequestElevation(ctx, a, ElevationRequest{Agent: c.ID, Ring: 2, Reason: "x"}); err == nil {
		t.Fatal("an agent elevated another")
	}
	for i, ch := range [][]delta.Change{
		{{Path: "x", Operation: delta.OpCreate, ContentHash: oid('1')}},
		{{Path: "x", Operation: delta.OpModify, ContentHash: oid('2')}, {Path: "y", Operation: delta.OpCreate, ContentHash: oid('3')}},
	} {
		if _, _, err := g.AppendDelta(ctx, a, "alpha", DeltaRequest{TurnID: string(rune('a' + i)), Changes: ch}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := g.StartSaga(ctx, a, "s1", "alpha", []saga.StepSpec{saga.NewStepSpec("one", "x", "undo-x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ReportSagaStep(ctx, a, "s1", SagaReport{Step: "one", Transition: event.SagaStart}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Quarantine(ctx, g.root, c.ID, QuarantineRequest{Reason: "manual", Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.SetPolicy(ctx, g.root, policy.Policy{Name: "quiet", BlockedPatterns: []string{"secret"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "quiet", Agent: b.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.SetSignalMask(ctx, b, []string{"SIGINT"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Signal(ctx, g.root, b.ID, "SIGINT", "note"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Signal(ctx, g.root, b.ID, "SIGSTOP", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Kill(ctx, g.root, a.ID, KillRequest{Reason: "manual", Session: "alpha"}); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Minute)
	g.expireControl(ctx)
	k.mu.Lock()
	if k.ledger.Elevations[expiring.ID].Ended == "" || k.ledger.Kills != 1 || len(k.ledger.Sessions) != 2 {
		t.Fatalf("the scenario did not reach its state")
	}
	live := k.ledger.Snapshot()
	k.mu.Unlock()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	snapshot := func() []byte {
		t.Helper()
		k2, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer k2.Close()
		k2.mu.Lock()
		defer k2.mu.Unlock()
		return k2.ledger.Snapshot()
	}
	if restarted := snapshot(); !bytes.Equal(live, restarted) {
		t.Fatalf("state after restart differs:\nlive      %s\nrestarted %s", live, restarted)
	}
	if err := os.Remove(dir + "/" + logstore.StateFileName); err != nil {
		t.Fatal(err)
	}
	if replayed := snapshot(); !bytes.Equal(live, replayed) {
		t.Fatalf("state replayed from the log differs:\nlive     %s\nreplayed %s", live, replayed)
	}
}
