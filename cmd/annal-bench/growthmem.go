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
	// over 1+GOGC/100, as the collector set the goal from it.
	heapLive, heapInUse, heapGoal uint64
}

// readAnnaldMemory reads the memory of the annald process pid, which
// serves /metrics at url.
func readAnnaldMemory(ctx context.Context, pid int, url string) annaldMemory {
	m := annaldMemory{procMemory: procStatusMemory(fmt.Sprintf("/proc/%d/status", pid))}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid)); err == nil {
		m.stateMap = procmem.MappedRSSIn(f, "state.db")
		f.Close()
	}
	gauges, err := scrapeGauges(ctx, url+"/metrics", "go_memstats_heap_inuse_bytes", "go_memstats_next_gc_bytes", "go_gc_gogc_percent")
	if err == nil && gauges[2] > 0 {
		m.heapInUse, m.heapGoal = uint64(gauges[0]), uint64(gauges[1])
		m.heapLive = uint64(gauges[1] * 100 / (100 + gauges[2]))
	}
	return m
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
	return fmt.Sprintf("%d MiB\t%d / %d / %d MiB\t%.1f / %d / %d MiB", m.total>>10, m.anon>>10, m.file>>10, m.stateMap>>10,
		float64(m.heapLive)/(1<<20), m.heapInUse>>20, m.heapGoal>>20)
}

// memoryColumns are the table's heads of String's columns.
const memoryColumns = "RSS\tanon / file / state.db map\theap live / in use / GC goal"
