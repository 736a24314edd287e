package gcgoal

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 256 << 20, MaxPercent},        // nothing marked yet
		{20 << 20, 256 << 20, MaxPercent}, // 1280% would be more than the cap
		{64 << 20, 256 << 20, 400},        // goal 64 + 256 MiB
		{256 << 20, 256 << 20, 100},       // the headroom is the live heap: Go's default
		{1 << 30, 256 << 20, 100},         // past the headroom, never below the default
		{100 << 20, 150 << 20, 150},       // 100 + 150 MiB
		{10 << 20, 0, 100},                // no headroom asked: the default
	} {
		if got := PercentFor(c.live, c.headroom); got != c.want {
			t.Errorf("PercentFor(%d MiB, %d MiB) = %d, want %d", c.live>>20, c.headroom>>20, got, c.want)
		}
	}
}

// readMetric reads one uint64 runtime metric.
func readMetric(t *testing.T, name string) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("metric %s is not a uint64", name)
	}
	return s[0].Value.Uint64()
}

// waitPercent collects until the collector's percentage is want, since
// the keeper sets it in a clean-up after a collection, on its own
// goroutine.
func waitPercent(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if got := int(readMetric(t, "/gc/gogc:percent")); got == want {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("collector percentage %d, want %d (live heap %d MiB)", got, want, readMetric(t, liveHeap)>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var keepAlive [][]byte

func TestKeep_FollowsTheLiveHeapAndRestores(t *testing.T) {
	before := debug.SetGCPercent(150)
	defer debug.SetGCPercent(before)
	const headroom = 64 << 20
	stop := Keep(headroom)
	defer stop()

	// A small live heap: the goal is the headroom above it, capped.
	keepAlive = [][]byte{make([]byte, 8<<20)}
	runtime.GC()
	waitPercent(t, PercentFor(readMetric(t, liveHeap), headroom))
	if p := int(readMetric(t, "/gc/gogc:percent")); p <= 100 {
		t.Fatalf("percentage %d with %d MiB live and %d MiB headroom: the headroom did not raise the goal", p, readMetric(t, liveHeap)>>20, headroom>>20)
	}
	if goal, live := readMetric(t, "/gc/heap/goal:bytes"), readMetric(t, liveHeap); goal < live+headroom*9/10 {
		t.Errorf("heap goal %d MiB with %d MiB live: less than the headroom above it", goal>>20, live>>20)
	}

	// The live heap outgrows the headroom: Go's default again.
	for range 12 {
		keepAlive = append(keepAlive, make([]byte, 8<<20))
	}
	waitPercent(t, 100)

	// A second Keep while one runs changes nothing.
	Keep(1 << 40)()
	runtime.GC()
	if p := int(readMetric(t, "/gc/gogc:percent")); p != 100 {
		t.Errorf("a second Keep changed the percentage to %d", p)
	}

	// Stopped: the percentage set before Keep, whatever the heap does
	// (a keeper still running would raise it for the empty heap).
	keepAlive = nil
	stop()
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if p := int(readMetric(t, "/gc/gogc:percent")); p != 150 {
		t.Errorf("percentage %d after stop, want the 150 set before Keep", p)
	}
}
