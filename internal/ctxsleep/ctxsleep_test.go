package ctxsleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep_WaitsItsTime(t *testing.T) {
	start := time.Now()
	if err := Sleep(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("slept %v, want at least 20ms", d)
	}
}

func TestSleep_EndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cut short: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("a cancelled sleep of an hour took %v", d)
	}
}
