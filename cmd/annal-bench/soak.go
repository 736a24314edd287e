package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/procmem"
	"github.com/annal-dev/annal/kernel"
)

// soakOptions configure the soak: an open loop at a fixed rate, sampling
// the data folder's size and the process's memory.
type soakOptions struct {
	duration time.Duration
	rate     int
	clients  int
	sample   time.Duration
	gc       time.Duration // Tessera's garbage collection interval (0: the kernel's default)
}

// soakSample is one reading of the soak.
type soakSample struct {
	at         time.Duration
	events     uint64
	entryBytes uint64 // the entries' own bytes
	apparent   int64  // the data folder's file sizes
	allocated  int64  // its allocated blocks
	partials   int    // files in .p (partial tile and bundle) folders
	// rss is the resident set; anon and file split it into the memory the
	// process allocated (the Go heap, stacks) and the pages of files it
	// maps (bbolt maps its state file), which the kernel may drop.
	rss       procMemory
	heapInUse uint64 // the Go heap's spans in use (runtime.MemStats.HeapInuse)
}

// procMemory is the resident set from /proc/self/status, in KiB.
// procMemory is in kB. stateMap is the part of file that is the kernel's
// state file (state.db) as bbolt maps it, from /proc/self/smaps.
type procMemory struct{ total, anon, file, stateMap int64 }

// soak runs the kernel at a fixed rate for o.duration and prints the data
// folder's bytes per event against the entries' own bytes plus 64 (a leaf
// hash and the bundle's framing, with room), and RSS over time.
func soak(ctx context.Context, dir string, bo options, o soakOptions, out io.Writer) error {
	cfg := benchConfig(dir, bo)
	if o.gc > 0 {
		cfg.GCInterval = o.gc
	}
	k, url, cred, stop, err := startKernelWith(cfg)
	if err != nil {
		return err
	}
	defer stop()
	c, err := client.New(url, cred)
	if err != nil {
		return err
	}
	s := &soakRun{k: k, c: c, dir: dir}
	work := make(chan int, o.clients)
	var wg sync.WaitGroup
	for range o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.submitEach(ctx, work)
		}()
	}
	s.start = time.Now()
	if err := s.drive(o, work); err != nil {
		return err
	}
	close(work)
	wg.Wait()
	time.Sleep(2 * o.gcInterval(cfg.GCInterval)) // the last partials are collected
	if err := s.take(); err != nil {
		return err
	}
	if err := writeSoakTable(out, s.samples); err != nil {
		return err
	}
	if third := len(s.samples) / 3; third > 0 {
		ratio := func(of func(soakSample) int64) float64 { return lastToFirst(s.samples, third, of) }
		fmt.Fprintf(out, "soak: %d events at %d/s for %v (%d dropped or failed); last third / first third: RSS %.2f, anon %.2f, file %.2f, RSS less the state file's map %.2f, Go heap %.2f\n",
			s.events.Load(), o.rate, o.duration, s.failures.Load(),
			ratio(func(s soakSample) int64 { return s.rss.total }), ratio(func(s soakSample) int64 { return s.rss.anon }),
			ratio(func(s soakSample) int64 { return s.rss.file }), ratio(func(s soakSample) int64 { return s.rss.total - s.rss.stateMap }),
			ratio(func(s soakSample) int64 { return int64(s.heapInUse) }))
	}
	return nil
}

// soakRun is one soak: its kernel and client, what the clients counted,
// and the samples taken.
type soakRun struct {
	k     *kernel.Kernel
	c     *client.Client
	dir   string
	start time.Time

	entryBytes, events, failures atomic.Uint64
	samples                      []soakSample
}

// submitEach submits the i-th action for each i from work, and counts the
// events and their entries' bytes, or the failure.
func (s *soakRun) submitEach(ctx context.Context, work <-chan int) {
	for i := range work {
		rc, err := s.c.Submit(ctx, api.ActionRequest{Type: "mutate", Target: fmt.Sprintf("workspace/soak/%d", i), Payload: benchPayload(i)})
		if err != nil {
			s.failures.Add(1)
			continue
		}
		raw, err := s.k.Entry(ctx, rc.Index)
		if err == nil {
			s.entryBytes.Add(uint64(len(raw)))
			s.events.Add(1)
		}
	}
}

// drive hands out work at o.rate for o.duration, an open loop, and takes
// a sample every o.sample.
func (s *soakRun) drive(o soakOptions, work chan<- int) error {
	tick := time.Second / time.Duration(o.rate)
	next, nextSample := s.start, s.start.Add(o.sample)
	for i := 0; time.Since(s.start) < o.duration; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(tick)
		select {
		case work <- i:
		default: // the kernel is behind: the open loop drops, never queues without bound
			s.failures.Add(1)
		}
		if time.Now().After(nextSample) {
			if err := s.take(); err != nil {
				return err
			}
			nextSample = nextSample.Add(o.sample)
		}
	}
	return nil
}

// take takes a sample of the data folder and the process's memory.
func (s *soakRun) take() error {
	sample, err := sampleFolder(s.dir)
	if err != nil {
		return err
	}
	sample.at, sample.events, sample.entryBytes = time.Since(s.start).Round(time.Second), s.events.Load(), s.entryBytes.Load()
	s.samples = append(s.samples, sample)
	return nil
}

// writeSoakTable prints a row for each sample with events: bytes per
// event and memory.
func writeSoakTable(out io.Writer, samples []soakSample) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "time\tevents\tentry B/event\tfolder B/event\tallocated B/event\tratio to entry+64\tpartial files\tRSS MiB\tanon MiB\tfile MiB\tof it state.db MiB\tGo heap MiB\t")
	for _, s := range samples {
		if s.events == 0 {
			continue
		}
		per := float64(s.entryBytes) / float64(s.events)
		fmt.Fprintf(tw, "%v\t%d\t%.0f\t%.0f\t%.0f\t%.2f\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", s.at, s.events, per,
			float64(s.apparent)/float64(s.events), float64(s.allocated)/float64(s.events),
			float64(s.allocated)/float64(s.events)/(per+64), s.partials,
			float64(s.rss.total)/1024, float64(s.rss.anon)/1024, float64(s.rss.file)/1024, float64(s.rss.stateMap)/1024, float64(s.heapInUse)/(1<<20))
	}
	return tw.Flush()
}

// lastToFirst is the ratio of a measure summed over the last third
// samples to the same over the first third.
func lastToFirst(samples []soakSample, third int, of func(soakSample) int64) float64 {
	var first, last int64
	for _, s := range samples[:third] {
		first += of(s)
	}
	for _, s := range samples[len(samples)-third:] {
		last += of(s)
	}
	return float64(last) / float64(first)
}

func (o soakOptions) gcInterval(d time.Duration) time.Duration { return max(d, time.Second) }

// sampleFolder walks the data folder.
func sampleFolder(dir string) (soakSample, error) {
	var s soakSample
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) { // removed by Tessera's clean-up while walking
				return nil
			}
			return err
		}
		if e.IsDir() {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		s.apparent += fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			s.allocated += st.Blocks * 512
		}
		if strings.HasSuffix(filepath.Dir(p), ".p") {
			s.partials++
		}
		return nil
	})
	s.rss = readProcMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.heapInUse = ms.HeapInuse
	return s, err
}

// readProcMemory reads this process's resident set (annal-bench runs the
// kernel in process) from /proc/self/status.
func readProcMemory() procMemory {
	m := procStatusMemory("/proc/self/status")
	m.stateMap = procmem.MappedRSS("state.db")
	return m
}

// procStatusMemory reads a process's resident set from its /proc status
// file (path), in KiB; zero when it cannot be read.
func procStatusMemory(path string) procMemory {
	var m procMemory
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			m.total = n
		case "RssAnon":
			m.anon = n
		case "RssFile":
			m.file = n
		}
	}
	return m
}
