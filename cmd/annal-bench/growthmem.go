package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/annal-dev/annal/internal/procmem"
)

// annaldMemory is where an annald process's resident memory goes: its
// resident set split into anonymous memory (the Go heap, stacks) and
// mapped file pages, the part of those that is the state file's map, and
// the Go heap as annald's /metrics reports it: the live heap the last
// collection marked, the spans in use and the collector's goal (what the
// heap may grow to before the next collection: gcgoal keeps it a fixed
// headroom above the live heap, at most MaxPercent more).
type annaldMemory struct {
	procMemory // KiB
	// In bytes; zero when /metrics could not be read. live is the goal
	// over 1+GOGC/100, as the collector set the goal from it; retained is
	// the heap's memory not given back to the system (what of the heap
	// can be resident), stacks the goroutines' stacks.
	heapLive, heapInUse, heapGoal, heapRetained, stacks uint64
}

// readAnnaldMemory reads the memory of the annald process pid, which
// serves /metrics at url.
func readAnnaldMemory(ctx context.Context, pid int, url string) annaldMemory {
	m := annaldMemory{procMemory: procStatusMemory(fmt.Sprintf("/proc/%d/status", pid))}
	m.stateMap = stateMapOf(pid)
	g, err := scrapeGauges(ctx, url+"/metrics", "go_memstats_heap_inuse_bytes", "go_memstats_next_gc_bytes", "go_gc_gogc_percent",
		"go_memstats_heap_sys_bytes", "go_memstats_heap_released_bytes", "go_memstats_stack_sys_bytes")
	if err == nil && g[2] > 0 {
		m.heapInUse, m.heapGoal = uint64(g[0]), uint64(g[1])
		m.heapLive = uint64(g[1] * 100 / (100 + g[2]))
		m.heapRetained, m.stacks = uint64(g[3]-g[4]), uint64(g[5])
	}
	return m
}

// stateFileName is the name of a data folder's state file, as
// kernel/internal/logstore names it.
const stateFileName = "state.db"

// stateMapOf is the resident KiB of process pid's map of its state file
// (bbolt's state.db); zero when it cannot be read.
func stateMapOf(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	return procmem.MappedRSSIn(f, stateFileName)
}

// samplePeaks reads the RSS and the state file map of process pid every
// interval until the function it returns is called, which answers the
// highest of each, in KiB: the state file's pages are let go of now and
// then, so a reading at the end alone would miss what they reached.
func samplePeaks(pid int, every time.Duration) func() (rss, stateMap int64) {
	stop, done := make(chan struct{}), make(chan struct{})
	var rss, stateMap int64
	sample := func() {
		rss = max(rss, procStatusMemory(fmt.Sprintf("/proc/%d/status", pid)).total)
		stateMap = max(stateMap, stateMapOf(pid))
	}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() (int64, int64) {
		close(stop)
		<-done
		return rss, stateMap
	}
}

// scrapeGauges reads the values of the unlabelled metrics names from the
// Prometheus text at url, in the order asked; a metric it lacks is an
// error.
func scrapeGauges(ctx context.Context, url string, names ...string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseGauges(io.LimitReader(resp.Body, 8<<20), names...)
}

// parseGauges finds names' values in a Prometheus text exposition.
func parseGauges(r io.Reader, names ...string) ([]float64, error) {
	want := map[string]int{}
	for i, n := range names {
		want[n] = i
	}
	vals, found := make([]float64, len(names)), 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		i, asked := want[name]
		if !ok || !asked {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
		vals[i] = v
		delete(want, name)
		found++
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if found < len(names) {
		return nil, fmt.Errorf("metrics lack %d of %v", len(names)-found, names)
	}
	return vals, nil
}

// String is the memory as the growth table shows it, in MiB: RSS, then
// its parts.
func (m annaldMemory) String() string {
	return fmt.Sprintf("%d MiB\t%d / %d / %d MiB\t%.1f / %d / %d / %d MiB\t%d MiB", m.total>>10, m.anon>>10, m.file>>10, m.stateMap>>10,
		float64(m.heapLive)/(1<<20), m.heapInUse>>20, m.heapGoal>>20, m.heapRetained>>20, m.stacks>>20)
}

// memoryColumns are the table's heads of String's columns.
const memoryColumns = "RSS\tanon / file / state.db map\theap live / in use / GC goal / retained\tstacks"
