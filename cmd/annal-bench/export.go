package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
)

// exportPhases exports the rebuild phase's log as audit bundles and
// verifies them as they stream (export piped into the verifier): the whole
// log as one range, and one agent's events as a sparse bundle with an
// inclusion proof each. It reports events/s and the largest Go heap seen,
// which stays flat as logs grow: both ends stream.
func exportPhases(ctx context.Context, cfg kernel.Config, actor string) ([]row, error) {
	k, err := kernel.Open(cfg)
	if err != nil {
		return nil, err
	}
	defer k.Close()
	cp, err := k.LatestCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := k.AwaitInclusionProof(ctx, cp.Size-1); err != nil {
		return nil, err
	}
	policy, err := verifier.KeyPolicy(k.VerifierKey())
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, c := range []struct {
		name string
		sel  kernel.ExportSelection
	}{
		{"whole log, one range", kernel.ExportSelection{}},
		{"one agent's actions, inclusion proof each", kernel.ExportSelection{Actor: actor, Kind: string(event.KindAction)}},
	} {
		runtime.GC()
		var peak atomic.Uint64
		stop := make(chan struct{})
		go func() {
			var m runtime.MemStats
			for {
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		pr, pw := io.Pipe()
		start := time.Now()
		done := make(chan error, 1)
		var res *kernel.ExportResult
		go func() {
			var err error
			res, err = k.Export(ctx, c.sel, pw, nil)
			pw.CloseWithError(err)
			done <- err
		}()
		vr, verr := verifier.VerifyBundle(pr, policy, nil)
		_, _ = io.Copy(io.Discard, pr)
		eerr := <-done
		elapsed := time.Since(start)
		close(stop)
		if eerr != nil {
			return nil, eerr
		}
		if verr != nil {
			return nil, verr
		}
		if vr.Events != res.Events {
			return nil, fmt.Errorf("exported %d events, verified %d", res.Events, vr.Events)
		}
		// A selection reads the whole log to find its events: the rate is of
		// log entries read, the note says how many were selected.
		rows = append(rows, row{fmt.Sprintf("export | verify, %s", c.name), fmt.Sprintf("%.0f log entries/s", float64(cp.Size)/elapsed.Seconds()),
			fmt.Sprintf("%d events selected, %.1f MB, heap peak %d MiB", res.Events, float64(res.Bytes)/(1<<20), peak.Load()>>20)})
	}
	return rows, nil
}
