// Package gcgoal keeps the garbage collector's heap goal a fixed headroom
// above the live heap, within MaxPercent, as long as the process runs.
//
// Go's default goal (GOGC=100) is twice the live heap. A server whose live
// heap is small but which allocates a little for every request then
// collects many times a second: annald under 512 agents holds about 20 MB
// live and allocates about 15 KB an action, so it collected fourteen times
// a second, each time scanning the stacks of a thousand goroutines. With a
// fixed headroom the collector runs rarely while the heap is small, and
// nothing changes once the live heap outgrows the headroom: twice the live
// heap is then the larger goal, and Go's default holds.
//
// The goal follows the live heap: after every collection the collector's
// percentage (GOGC) is set again from the live heap that collection found,
// so the heap never grows more than the headroom (or the live heap, when
// that is larger) between collections. The percentage is at most
// MaxPercent, so that a nearly empty heap does not get a goal of many
// times itself. A memory limit (GOMEMLIMIT) still applies as Go applies
// it.
package gcgoal

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// MaxPercent is the highest percentage Keep sets: a goal of at most eleven
// times the live heap.
const MaxPercent = 1000

// DefaultHeadroom is annald's headroom. Why 256 MiB: under 512 agents
// annald holds about 20 MB live, so the goal is MaxPercent's cap, eleven
// times that; collections drop from about fourteen a second to one or
// two, and RSS under load stays within the live heap plus the headroom.
const DefaultHeadroom = 256 << 20

// liveHeap is the runtime metric of the heap the last collection marked.
const liveHeap = "/gc/heap/live:bytes"

// PercentFor is the collector's percentage that puts the goal headroom
// bytes above a live heap of live bytes: never below Go's default of 100,
// never above MaxPercent.
func PercentFor(live, headroom uint64) int {
	switch {
	case headroom == 0:
		return 100
	case live == 0:
		return MaxPercent
	}
	// In floating point: headroom*100 overflows for a headroom past 2^57.
	p := float64(headroom) * 100 / float64(live)
	switch {
	case p < 100:
		return 100
	case p > MaxPercent:
		return MaxPercent
	}
	return int(p)
}

// keeper is one Keep's state, shared with the clean-up that runs after
// each collection.
type keeper struct {
	headroom uint64
	stopped  atomic.Bool
	mu       sync.Mutex // serialises afterCollection with stop
	percent  int
	sample   []metrics.Sample
}

// sentinel is allocated for the collector to free: its clean-up runs
// after the collection that found it unreachable. It holds a pointer so
// that it is never one of the tiny allocations Go packs together, whose
// clean-ups may never run.
type sentinel struct {
	_ *byte
	_ [8]byte
}

var active atomic.Bool

// Keep keeps the goal at least headroom bytes above the live heap from
// now on, until the returned function is called, which restores the
// percentage that was set before. Only one Keep may be active at a time
// in a process (the percentage is the process's); a second call while one
// is active changes nothing and its stop does nothing.
func Keep(headroom uint64) (stop func()) {
	if !active.CompareAndSwap(false, true) {
		return func() {}
	}
	k := &keeper{headroom: headroom, sample: []metrics.Sample{{Name: liveHeap}}}
	k.mu.Lock()
	k.percent = PercentFor(k.live(), headroom)
	previous := debug.SetGCPercent(k.percent)
	k.mu.Unlock()
	k.arm()
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			k.stopped.Store(true)
			debug.SetGCPercent(previous)
			k.mu.Unlock()
			active.Store(false)
		})
	}
}

// arm registers the clean-up that runs after the next collection.
func (k *keeper) arm() {
	runtime.AddCleanup(new(sentinel), (*keeper).afterCollection, k)
}

func (k *keeper) afterCollection() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped.Load() {
		return
	}
	// Small moves are not worth a new goal: the live heap jitters between
	// collections by the requests in flight.
	if p := PercentFor(k.live(), k.headroom); p < k.percent*9/10 || p > k.percent*11/10 {
		k.percent = p
		debug.SetGCPercent(p)
	}
	k.arm()
}

func (k *keeper) live() uint64 {
	metrics.Read(k.sample)
	if k.sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return k.sample[0].Value.Uint64()
}
