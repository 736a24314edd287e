package kernel

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/transparency-dev/tessera"
)

// Finding 10: the disk fills while a hold with a timeout is overdue. Tessera
// reports the append of the timeout as failed although the entry landed;
// the old kernel wrote the timeout again a second later, and then could
// neither start nor rebuild. Now a failed append stops every writer — the
// hold loop included — until the storage takes writes again; then the
// kernel folds what landed and resumes by itself, and the log stays
// foldable.
func TestAttack_FailedAppendNeverWritesWhatCannotFold(t *testing.T) {
	dir := t.TempDir()
	var diskFull atomic.Bool
	g := openGov(t, func(c *Config) {
		c.DataDir = dir
		c.DisableWriteAhead = true // Tessera answers; writeahead_test.go has the write-ahead log's failures
		c.probeWrite = func() error {
			if diskFull.Load() {
				return syscall.ENOSPC
			}
			return nil
		}
		c.wrapAdd = func(add tessera.AddFn) tessera.AddFn {
			return func(ctx context.Context, e *tessera.Entry) tessera.IndexFuture {
				f := add(ctx, e)
				return func() (tessera.Index, error) {
					idx, err := f()
					if err == nil && diskFull.Load() {
						return idx, errors.New("write tile: no space left on device") // landed, reported failed
					}
					return idx, err
				}
			}
		}
	})
	ctx := context.Background()
	agent, _ := g.agent(1000, "workspace/**:mutate")
	g.envelope(g.root, EnvelopeRequest{Holder: agent.ID, Budget: 500, Grants: grants("workspace/**:mutate"),
		HoldOn: grants("workspace/**:mutate"), HoldTimeoutSecs: 1})
	rc, err := g.submit(agent, event.Mutate, "workspace/release")
	if err != nil || rc.Status != StatusHeld {
		t.Fatalf("held: %+v %v", rc, err)
	}
	g.clock.advance(2 * time.Second)
	diskFull.Store(true)
	size := g.size()
	g.timeOutHolds(ctx) // lands, reported failed
	landed := g.size()
	if landed != size+1 {
		t.Fatalf("log grew from %d to %d; the timeout should have landed once", size, landed)
	}
	if err := g.Ready(); err == nil {
		t.Fatal("the kernel says it is ready right after a failed append")
	}
	if _, err := g.submit(agent, event.Observe, "workspace/x"); !errors.Is(err, logstore.ErrUnavailable) {
		t.Fatalf("a request while the disk is full: %v, want unavailable", err)
	}
	g.produce(ctx, true)
	g.expireControl(ctx)
	if g.size() != landed {
		t.Fatalf("while the disk was full the kernel wrote %d more entries", g.size()-landed)
	}
	diskFull.Store(false) // space returns: the kernel resumes by itself
	waitReady(t, g.Kernel)
	g.timeOutHolds(ctx)
	g.mu.Lock()
	status := g.ledger.Holds[rc.HoldID].Status
	g.mu.Unlock()
	if status != ledger.HoldTimedOut || g.size() != landed {
		t.Fatalf("after resuming: hold %s, log grew by %d (the timeout that landed must be folded, not written again)", status, g.size()-landed)
	}
	if _, err := g.submit(agent, event.Observe, "workspace/x"); err != nil {
		t.Fatalf("a request after resuming: %v", err)
	}
	if g.size() != landed+1 {
		t.Fatalf("one action after resuming grew the log by %d", g.size()-landed)
	}
	if diff, err := g.stateMatchesReplay(ctx); err != nil || diff != nil {
		t.Fatalf("state after resuming differs from the replay: %v %v", diff, err)
	}
	if err := g.Close(); err != nil {
		t.Logf("close after a failed append: %v", err)
	}
	// The kernel starts again on the log, folds the timeout that landed,
	// and the audit of the log finds nothing.
	cfg := testConfig(t, dir)
	cfg.Now = g.clock.Now
	k, err := Open(cfg)
	if err != nil {
		t.Fatalf("restart after the disk filled: %v", err)
	}
	defer k.Close()
	k.mu.Lock()
	h := k.ledger.Holds[rc.HoldID]
	k.mu.Unlock()
	if h.Status != ledger.HoldTimedOut {
		t.Fatalf("hold after restart: %s", h.Status)
	}
	key, _ := LocalVerifierKey(dir)
	if rep, err := Audit(ctx, LocalLog(dir), key); err != nil || rep.Broken != nil {
		t.Fatalf("audit after the disk filled: %+v %v", rep, err)
	}
}

// waitReady waits (bounded) until the kernel takes writes again.
func waitReady(t testing.TB, k *Kernel) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for k.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the kernel did not resume: %v", k.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
