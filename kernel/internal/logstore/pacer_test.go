package logstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestPacer_KeepsWorkToItsShare: work in steps of 5 ms at a share of a
// quarter rests 60 ms after each 20 ms stretch, not before; at share 1
// it never rests; an ended context stops the loop.
func TestPacer_KeepsWorkToItsShare(t *testing.T) {
	clock := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var rests []time.Duration
	p := &pacer{share: 0.25, now: func() time.Time { return clock }, since: clock,
		sleep: func(_ context.Context, d time.Duration) error {
			rests = append(rests, d)
			clock = clock.Add(d)
			return nil
		}}
	ctx := context.Background()
	start := clock
	for range 12 {
		clock = clock.Add(5 * time.Millisecond) // a step of work
		if err := p.rest(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if want := []time.Duration{60 * time.Millisecond, 60 * time.Millisecond, 60 * time.Millisecond}; !slices.Equal(rests, want) {
		t.Fatalf("rests %v, want %v", rests, want)
	}
	if elapsed := clock.Sub(start); elapsed != 240*time.Millisecond {
		t.Fatalf("60 ms of work took %v, want 240 ms at a quarter", elapsed)
	}
	full := &pacer{share: 1, now: func() time.Time { return clock }, since: clock,
		sleep: func(context.Context, time.Duration) error { t.Fatal("a pacer at share 1 rested"); return nil }}
	for range 10 {
		clock = clock.Add(time.Second)
		if err := full.rest(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.rest(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("rest after the context ended: %v", err)
	}
}
