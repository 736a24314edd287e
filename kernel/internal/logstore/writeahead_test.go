package logstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestWriteAhead_PacingIntegratorIsNotWokenByEachWrite: while the
// integrator waits out the time between two writes of the tiles, a write
// whose tail does not fill a batch sends it no wake (a lone client's
// receipt paid for one each), and the entries still reach the tiles
// once the interval is over; a write that fills a batch wakes it.
func TestWriteAhead_PacingIntegratorIsNotWokenByEachWrite(t *testing.T) {
	dir, err := OpenDataDir(t.TempDir(), "test.local/pacing")
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	w, err := openWriteAhead(dir, 1<<16, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	w.onFailure = func(err error, _ bool) { t.Errorf("tile log refused: %v", err) }
	w.start()
	defer w.close(context.Background())
	group := func(n int, tag string) []*CommitRequest {
		g := make([]*CommitRequest, n)
		for i := range g {
			g[i] = &CommitRequest{entry: fmt.Appendf(nil, "%s %d", tag, i)}
		}
		return g
	}
	write := func(g []*CommitRequest) {
		t.Helper()
		for _, r := range w.write(g) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
		}
	}
	pacing := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.pacing
	}
	write(group(1, "first")) // the idle integrator is woken, writes it, then paces
	waitFor("the integrator paces", pacing)
	for i := range 5 {
		write(group(1, fmt.Sprint("paced ", i)))
	}
	w.mu.Lock()
	if w.pacing && w.wakesIntegrator() {
		t.Errorf("a tail of %d entries wakes the pacing integrator", len(w.tail))
	}
	w.mu.Unlock()
	waitFor("the tiles hold every entry", w.caughtUp)
	if got := w.tw.Size(); got != 6 {
		t.Fatalf("tile log size %d, want 6", got)
	}
	w.mu.Lock()
	// As a full batch written while it paces leaves the tail (put back
	// under the same lock: the integrator never sees it).
	tail, paced := w.tail, w.pacing
	w.tail, w.pacing = make([][]byte, maxIntegrateBatch), true
	full := w.wakesIntegrator()
	w.tail, w.pacing = tail, paced
	w.mu.Unlock()
	if !full {
		t.Error("a tail that fills a batch does not wake the pacing integrator")
	}
}
