package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/cli"
	"github.com/annal-dev/annal/internal/gcgoal"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/server"
	"github.com/spf13/cobra"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
	"k8s.io/klog/v2"
)

type options struct {
	dir          string
	duration     time.Duration
	concurrency  []int
	sequentialN  int
	proofN       int
	batchSize    uint
	batchAge     time.Duration
	noWriteAhead bool
	checkpointIv time.Duration
	cpuProfile   string
	memProfile   string
	governed     []int
	holdN        int
	rebuildN     int
	soak         soakOptions
	// tesseraServer: compare the governed phases with Tessera's
	// conformance server, interleaved (tesserasrv.go).
	tesseraServer bool
	// rounds is how many times the governed phases and the conformance
	// server are measured, interleaved; the ratio is of the means.
	rounds int
	// gcHeadroom is the collector's headroom of the bench process, where
	// annald's kernel runs: annald's default, so that it runs as deployed.
	gcHeadroom int64
	// annald is the annald binary the HTTP phases measure as its own
	// process; "" builds one, inProcess runs the kernel in this process.
	annald string
}

func newCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "annal-bench",
		Short:         "Measure actions/s, receipt latency and proof latency against raw Tessera",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout())
		},
		// Kernels run in this process too (--annald in-process, the
		// rebuild, export and soak phases), so it runs the collector as
		// annald serve does.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if o.rounds < 1 {
				return fmt.Errorf("--rounds %d: 1 or more", o.rounds)
			}
			if o.gcHeadroom < 0 {
				return fmt.Errorf("--gc-headroom %d: 0 or more bytes", o.gcHeadroom)
			}
			if _, gogcSet := os.LookupEnv("GOGC"); gogcSet && !cmd.Flags().Changed("gc-headroom") {
				o.gcHeadroom = 0 // GOGC wins, as with annald serve
			}
			if o.gcHeadroom > 0 {
				gcgoal.Keep(uint64(o.gcHeadroom))
			}
			return nil
		},
	}
	f := cmd.PersistentFlags() // the storage subcommand takes them too
	f.StringVar(&o.dir, "dir", "", "folder for the logs (default: a temporary folder); use the disk you want measured")
	f.DurationVar(&o.duration, "duration", 5*time.Second, "length of each throughput phase")
	f.IntSliceVar(&o.concurrency, "concurrency", []int{1, 64, 512}, "concurrent clients for the throughput phases")
	f.IntVar(&o.sequentialN, "sequential", 2000, "actions for the sequential latency phase")
	f.IntVar(&o.proofN, "proofs", 2000, "proofs for the proof latency phase")
	f.UintVar(&o.batchSize, "batch-size", kernel.DefaultBatchMaxSize, "Tessera batch size (both baseline and kernel)")
	f.DurationVar(&o.batchAge, "batch-age", kernel.DefaultBatchMaxAge, "Tessera batch age (both baseline and kernel)")
	f.DurationVar(&o.checkpointIv, "checkpoint-interval", kernel.DefaultCheckpointInterval, "checkpoint interval")
	f.BoolVar(&o.noWriteAhead, "no-write-ahead", false, "annald answers once Tessera has written an entry into the tiles, without its write-ahead log")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of annald to this file: of its whole run (annald serve --cpuprofile), or with --annald in-process of this process during the HTTP phases")
	f.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile (pprof allocs) of the whole run to this file")
	f.IntSliceVar(&o.governed, "governed", []int{64, 512}, "concurrent agents for the governed phases (each its own agent and envelope)")
	f.IntVar(&o.holdN, "holds", 200, "holds for the hold latency phase")
	f.IntVar(&o.rebuildN, "rebuild-events", 100_000, "events in the log that annald rebuild replays (0 skips)")
	f.BoolVar(&o.tesseraServer, "tessera-server", true, "run Tessera's conformance POSIX server (go install "+conformancePackage+"@"+conformanceVersion+") at the governed concurrencies, interleaved with the governed phases (A, B, A, B), and print the ratio")
	f.IntVar(&o.rounds, "rounds", 4, "with --tessera-server, measure the conformance server and the governed phases this many times, interleaved; the ratio is of the means (four by default: on a shared machine a round swings by ±30%)")
	f.DurationVar(&o.soak.duration, "soak", 0, "instead of the phases: run the kernel this long at --soak-rate and report disk bytes and RSS per event")
	f.IntVar(&o.soak.rate, "soak-rate", 2000, "soak: actions per second (an open loop)")
	f.IntVar(&o.soak.clients, "soak-clients", 64, "soak: concurrent clients")
	f.DurationVar(&o.soak.sample, "soak-sample", 10*time.Second, "soak: sampling interval")
	f.DurationVar(&o.soak.gc, "soak-gc", 0, "soak: Tessera's clean-up interval of partial tiles (0: the kernel's default)")
	f.StringVar(&o.annald, "annald", "", "the annald binary whose serve the HTTP phases measure, as its own process (default: built from this module with go build); \""+inProcess+"\" runs the kernel inside annal-bench instead")
	f.Int64Var(&o.gcHeadroom, "gc-headroom", gcgoal.DefaultHeadroom, "the garbage collector's headroom above the live heap, in bytes, as annald serve --gc-headroom: given to annald's process, and kept in this one, where the kernel of --annald in-process and of the rebuild, export and soak phases runs; 0: Go's default")
	cmd.AddCommand(storageCommand(&o), workloadCommand(&o), growthCommand(&o), replayCommand(&o), receiptCommand(&o))
	return cmd
}

type row struct {
	name, value, note string
}

func run(ctx context.Context, o options, out io.Writer) error {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	dir, placement, cleanup, err := benchFolder(o.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	if o.soak.duration > 0 {
		fmt.Fprintf(out, "annal-bench soak: %d CPUs, %s, %d actions/s from %d clients for %v, log in %s%s\n\n",
			runtime.NumCPU(), runtime.Version(), o.soak.rate, o.soak.clients, o.soak.duration, dir, placement)
		return soak(ctx, filepath.Join(dir, "soak"), o, o.soak, out)
	}
	fmt.Fprintf(out, "annal-bench: %d CPUs, %s, batch %d/%v, checkpoint every %v, %v per phase, GC headroom %d MiB, logs in %s%s\n\n",
		runtime.NumCPU(), runtime.Version(), o.batchSize, o.batchAge, o.checkpointIv, o.duration, o.gcHeadroom>>20, dir, placement)
	rows, baseline, err := baselinePhases(ctx, dir, o)
	if err != nil {
		return err
	}
	if o.annald, err = chooseAnnald(ctx, dir, o.annald, out); err != nil {
		return err
	}
	srv, err := startBenchServer(ctx, filepath.Join(dir, "annal"), o)
	if err != nil {
		return err
	}
	defer srv.stop()
	if o.cpuProfile != "" && o.annald == inProcess {
		stopProfile, err := cli.StartCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	served, err := servedPhases(ctx, dir, srv, o, baseline)
	if err != nil {
		return err
	}
	rows = append(rows, served...)
	// annald must have served every phase and stop cleanly.
	if err := srv.stop(); err != nil {
		return err
	}
	if o.rebuildN > 0 {
		r, err := rebuildPhase(ctx, filepath.Join(dir, "rebuild"), o)
		if err != nil {
			return fmt.Errorf("rebuild phase: %w", err)
		}
		rows = append(rows, r...)
	}
	if err := writeMemProfile(o.memProfile); err != nil {
		return err
	}
	return printRows(out, rows)
}

// benchFolder is the folder for the logs: --dir, or a temporary folder
// whose servers' subfolders are spread over block groups, then removed by
// cleanup. placement says how the folders are placed, for the header.
func benchFolder(given string) (dir, placement string, cleanup func(), err error) {
	if given != "" {
		return given, "", func() {}, nil
	}
	dir, err = os.MkdirTemp("", "annal-bench")
	if err != nil {
		return "", "", nil, err
	}
	placement = ", each server's folder in block groups of its own (chattr +T)"
	if err := spreadSubfolders(dir); err != nil {
		placement = fmt.Sprintf(" (folders placed beside it: %v)", err)
	}
	return dir, placement, func() { os.RemoveAll(dir) }, nil
}

// baselinePhases measures raw Tessera at each concurrency: its rows, and
// its rate by concurrency.
func baselinePhases(ctx context.Context, dir string, o options) ([]row, map[int]float64, error) {
	var rows []row
	baseline := map[int]float64{}
	for _, c := range o.concurrency {
		rate, err := tesseraBaseline(ctx, filepath.Join(dir, fmt.Sprintf("tessera-%d", c)), c, o)
		if err != nil {
			return nil, nil, fmt.Errorf("baseline at %d: %w", c, err)
		}
		baseline[c] = rate
		rows = append(rows, row{fmt.Sprintf("tessera POSIX Add, %d concurrent", c), fmt.Sprintf("%.0f adds/s", rate), "baseline"})
	}
	return rows, baseline, nil
}

// chooseAnnald returns the annald the HTTP phases measure (--annald, or
// one built when it is empty) and says which.
func chooseAnnald(ctx context.Context, dir, annald string, out io.Writer) (string, error) {
	if annald == "" {
		bin, err := findAnnald(ctx, dir)
		if err != nil {
			return "", err
		}
		annald = bin
	}
	if annald == inProcess {
		fmt.Fprintf(out, "annald: the kernel in this process, sharing its runtime with the load generator\n\n")
	} else {
		fmt.Fprintf(out, "annald: %s serve, its own process\n\n", annald)
	}
	return annald, nil
}

// servedPhases are the phases annald serves over HTTP: throughput at
// each concurrency against the baseline, receipt and proof latency, and
// the governed phases against the ungoverned throughput.
func servedPhases(ctx context.Context, dir string, srv *benchServer, o options, baseline map[int]float64) ([]row, error) {
	url, cred := srv.url, srv.cred
	var rows []row
	for _, c := range o.concurrency {
		rate, cpu, err := srv.measure(func() (float64, error) { return httpThroughput(ctx, url, cred, c, o.duration) })
		if err != nil {
			return nil, fmt.Errorf("http at %d: %w", c, err)
		}
		rows = append(rows, row{fmt.Sprintf("annald POST /v1/actions, %d concurrent", c), fmt.Sprintf("%.0f actions/s", rate),
			fmt.Sprintf("%.2fx of Tessera at %d%s", rate/baseline[c], c, cpuNote(cpu, "annald"))})
	}
	ungoverned := ratesOf(rows, "annald POST /v1/actions, %d concurrent")
	seq, err := interleavedSequential(ctx, filepath.Join(dir, "annal-other-mode"), filepath.Join(dir, "annal", walDirName), url, cred, o)
	if err != nil {
		return nil, err
	}
	rows = append(rows, seq...)
	size, plat, err := proofLatency(ctx, url, o.proofN)
	if err != nil {
		return nil, err
	}
	rows = append(rows,
		row{fmt.Sprintf("GET /v1/proof at size %d, p50", size), fmtDur(percentile(plat, 50)), fmt.Sprintf("n=%d, verified", len(plat))},
		row{fmt.Sprintf("GET /v1/proof at size %d, p99", size), fmtDur(percentile(plat, 99)), ""},
	)
	gov, err := interleavedGoverned(ctx, dir, srv, o, ungoverned)
	if err != nil {
		return nil, fmt.Errorf("governed phases: %w", err)
	}
	return append(rows, gov...), nil
}

// ratesOf reads the rates of the rows whose name is nameFormat with a
// concurrency, by concurrency, as the rows print them.
func ratesOf(rows []row, nameFormat string) map[int]float64 {
	rates := map[int]float64{}
	eachRate(rows, nameFormat, func(c int, rate float64) { rates[c] = rate })
	return rates
}

// eachRate calls f with the concurrency and the rate of each row whose
// name is nameFormat with a concurrency, in order.
func eachRate(rows []row, nameFormat string, f func(c int, rate float64)) {
	for _, r := range rows {
		var c int
		var rate float64
		if _, err := fmt.Sscanf(r.name, nameFormat, &c); err == nil {
			fmt.Sscanf(r.value, "%f", &rate)
			f(c, rate)
		}
	}
}

// writeMemProfile writes the allocation profile of the whole run to
// path, if one is asked for.
func writeMemProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// printRows prints the rows as a table: measure, result, note.
func printRows(out io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tresult\tnote")
	fmt.Fprintln(tw, "-------\t------\t----")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.name, r.value, r.note)
	}
	return tw.Flush()
}

// tesseraBaseline measures raw Tessera POSIX Add with the same batching and
// entries of the same size as the kernel writes.
func tesseraBaseline(ctx context.Context, dir string, concurrency int, o options) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	skey, _, err := checkpoints.GenerateLogKey("bench.local/tessera")
	if err != nil {
		return 0, err
	}
	signer, err := checkpoints.NewLogSigner(skey)
	if err != nil {
		return 0, err
	}
	driver, err := posix.New(ctx, posix.Config{Path: dir})
	if err != nil {
		return 0, err
	}
	a, shutdown, _, err := tessera.NewAppender(ctx, driver, tessera.NewAppendOptions().
		WithCheckpointSigner(signer).WithBatching(o.batchSize, o.batchAge).
		WithCheckpointInterval(o.checkpointIv).WithPushback(kernel.DefaultMaxOutstanding))
	if err != nil {
		return 0, err
	}
	defer shutdown(context.Background())
	entry := []byte(strings.Repeat("e", 330)) // about the size of a kernel action event
	// A refused add is a failure, not counted.
	rate, _ := closedLoop(concurrency, o.duration, func(_ int, i uint64) error {
		e := append([]byte(fmt.Sprint(i)), entry...)
		_, err := a.Add(ctx, tessera.NewEntry(e))()
		return err
	})
	return rate, nil
}

// closedLoop runs op from concurrency workers for d, worker w calling
// op(w, i) with i a number no other call gets, as soon as its last call
// returned, and returns the calls per second that succeeded. An error ends
// its worker; the first is returned, for the phases that fail on one.
func closedLoop(concurrency int, d time.Duration, op func(w int, i uint64) error) (float64, error) {
	var n, seq atomic.Uint64
	var firstErr atomic.Value
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := op(w, seq.Add(1)); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	rate := float64(n.Load()) / time.Since(start).Seconds()
	if err, ok := firstErr.Load().(error); ok {
		return rate, err
	}
	return rate, nil
}

// benchConfig is the kernel configuration of every phase: the options'
// batching, a rich root, and the rate limit gate running on every agent
// action with limits no closed loop reaches, so that the phases measure
// what the gates cost, not the limits they enforce.
func benchConfig(dir string, o options) kernel.Config {
	cfg := kernel.DefaultConfig(dir)
	cfg.BatchMaxSize, cfg.BatchMaxAge, cfg.CheckpointInterval = o.batchSize, o.batchAge, o.checkpointIv
	cfg.DisableWriteAhead = o.noWriteAhead
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Energy.Genesis = benchGenesis
	cfg.RateLimits = map[ring.Ring]kernel.RateLimit{}
	for _, r := range []ring.Ring{ring.Root, ring.Privileged, ring.Standard, ring.Sandbox} {
		cfg.RateLimits[r] = kernel.RateLimit{Rate: benchRateLimit, Burst: benchRateLimit}
	}
	return cfg
}

const (
	// benchGenesis is root's energy: it funds every phase's agents.
	benchGenesis = 1 << 50
	// benchRateLimit is every ring's rate and burst, far above what a
	// closed loop reaches.
	benchRateLimit = 1_000_000_000
)

// benchServer is the kernel the HTTP phases measure: annald serve as its
// own process, or the kernel in this process (--annald in-process).
type benchServer struct {
	url, cred string
	// cpu is the server's CPU time so far; nil in process, where the
	// load generator's would be counted with it.
	cpu  func() (time.Duration, error)
	stop func() error
}

// startBenchServer starts the kernel on a fresh data folder dir, as
// o.annald says.
// Its stop may be called more than once (a deferred stop after the one
// whose error is checked); it stops the server once.
func startBenchServer(ctx context.Context, dir string, o options) (*benchServer, error) {
	if o.annald == inProcess {
		_, url, cred, stop, err := startKernel(dir, o)
		if err != nil {
			return nil, err
		}
		return &benchServer{url: url, cred: cred, stop: sync.OnceValue(func() error { stop(); return nil })}, nil
	}
	p, err := startAnnald(ctx, o.annald, dir, o)
	if err != nil {
		return nil, err
	}
	return &benchServer{url: p.url, cred: p.cred, cpu: p.cpu, stop: sync.OnceValue(p.stop)}, nil
}

// measure runs a closed loop (fn answers its rate) and answers with its
// rate and the server CPU time each operation took, 0 when that cannot be
// told.
func (s *benchServer) measure(fn func() (float64, error)) (float64, time.Duration, error) {
	return measureCPU(s.cpu, fn)
}

func measureCPU(cpu func() (time.Duration, error), fn func() (float64, error)) (float64, time.Duration, error) {
	if cpu == nil {
		rate, err := fn()
		return rate, 0, err
	}
	c0, err := cpu()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	rate, err := fn()
	elapsed := time.Since(start)
	if err != nil {
		return rate, 0, err
	}
	c1, err := cpu()
	if err != nil || rate <= 0 {
		return rate, 0, err
	}
	return rate, time.Duration(float64(c1-c0) / (rate * elapsed.Seconds())), nil
}

// cpuNote is a row's note on the CPU time each operation took the server
// who, or nothing when it was not measured.
func cpuNote(perOp time.Duration, who string) string {
	if perOp <= 0 {
		return ""
	}
	return fmt.Sprintf("; %.0f µs of %s CPU each", float64(perOp.Nanoseconds())/1000, who)
}

func startKernel(dir string, o options) (*kernel.Kernel, string, string, func(), error) {
	return startKernelWith(benchConfig(dir, o))
}

func startKernelWith(cfg kernel.Config) (*kernel.Kernel, string, string, func(), error) {
	k, err := kernel.Open(cfg)
	if err != nil {
		return nil, "", "", nil, err
	}
	url, stopServer, err := serveLoopback(k, cfg.Logger)
	if err != nil {
		k.Close()
		return nil, "", "", nil, err
	}
	raw, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		return nil, "", "", nil, err
	}
	stop := func() {
		stopServer()
		k.Close()
	}
	return k, url, strings.TrimSpace(string(raw)), stop, nil
}

// serveLoopback serves k's HTTP API on a free port of 127.0.0.1 and
// returns its base URL and how to stop serving.
func serveLoopback(k *kernel.Kernel, logger *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: server.New(k, logger)}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

func httpThroughput(ctx context.Context, url, cred string, concurrency int, d time.Duration) (float64, error) {
	return mutateLoop(ctx, url, cred, concurrency, d, func(i uint64) string { return "workspace/bench/" + strconv.FormatUint(i, 10) })
}

// mutateLoop is root actions/s from concurrency clients for d, action i
// on target(i).
func mutateLoop(ctx context.Context, url, cred string, concurrency int, d time.Duration, target func(uint64) string) (float64, error) {
	posters, err := newActionPosters(url, cred, concurrency)
	if err != nil {
		return 0, err
	}
	defer closePosters(posters)
	return closedLoop(concurrency, d, func(w int, i uint64) error {
		return posters[w].mutate(ctx, target(i), int(i))
	})
}

func sequentialLatency(ctx context.Context, url, cred string, n int) ([]time.Duration, error) {
	c, err := client.New(url, cred)
	if err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace/seq"}); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// interleavedSequential measures the receipt latency of one sequential
// client on the kernel at url and, interleaved with it in halves (A, B,
// A, B), on a second kernel in the other mode: without the write-ahead log
// when the first has one, and the other way round; and after each half,
// as many durable writes of the size of a lone receipt's in probeDir (the
// first kernel's wal folder), the floor under a receipt (syncProbe).
func interleavedSequential(ctx context.Context, otherDir, probeDir, url, cred string, o options) ([]row, error) {
	other := o
	other.noWriteAhead = !o.noWriteAhead
	other.cpuProfile = "" // the profile is the main kernel's
	otherSrv, err := startBenchServer(ctx, otherDir, other)
	if err != nil {
		return nil, err
	}
	defer otherSrv.stop()
	otherURL, otherCred := otherSrv.url, otherSrv.cred
	var main, alt []time.Duration
	syncs := map[string][]time.Duration{}
	half := max(o.sequentialN/2, 1)
	var probe *syncProbe
	for range 2 {
		lat, err := sequentialLatency(ctx, url, cred, half)
		if err != nil {
			return nil, err
		}
		main = append(main, lat...)
		if lat, err = sequentialLatency(ctx, otherURL, otherCred, half); err != nil {
			return nil, err
		}
		alt = append(alt, lat...)
		if probe == nil {
			if probe, err = newSyncProbe(probeDir, lastWALWriteBytes(probeDir)); err != nil {
				return nil, err
			}
			defer probe.close()
		}
		if err := probe.measure(half, syncs); err != nil {
			return nil, err
		}
	}
	if err := otherSrv.stop(); err != nil {
		return nil, err
	}
	mode := func(noWriteAhead bool) string {
		if noWriteAhead {
			return "answered once Tessera wrote the tiles (--no-write-ahead)"
		}
		return "answered once the write-ahead log synced"
	}
	p50, p99, altP50, altP99 := percentile(main, 50), percentile(main, 99), percentile(alt, 50), percentile(alt, 99)
	return append([]row{
		{"receipt latency, 1 sequential client, p50 / p99", fmtDur(p50) + " / " + fmtDur(p99), fmt.Sprintf("n=%d, %s", len(main), mode(o.noWriteAhead))},
		{"  the same, other mode, p50 / p99", fmtDur(altP50) + " / " + fmtDur(altP99),
			fmt.Sprintf("n=%d, %s, interleaved; p50 ratio %.2fx", len(alt), mode(other.noWriteAhead), float64(p50)/float64(altP50))},
	}, syncRows(syncs, probe.size, p50)...), nil
}

// syncRows are the rows of the sync probe's forms: each p50, and the
// receipt's p50 over it.
func syncRows(syncs map[string][]time.Duration, size int, receiptP50 time.Duration) []row {
	var rows []row
	for _, name := range syncFormNames {
		if lat := syncs[name]; len(lat) > 0 {
			p50 := percentile(lat, 50)
			rows = append(rows, row{fmt.Sprintf("  durable write of %d B in the data folder, %s, p50", size, syncFormLabel[name]), fmtDur(p50),
				fmt.Sprintf("n=%d, interleaved; receipt p50 / this p50: %.2fx", len(lat), float64(receiptP50)/float64(p50))})
		}
	}
	return rows
}

// proofLatency fetches proofs for random entries under the latest
// checkpoint and checks that each parses and names that checkpoint.
func proofLatency(ctx context.Context, url string, n int) (uint64, []time.Duration, error) {
	c, err := client.New(url, "")
	if err != nil {
		return 0, nil, err
	}
	// Wait until a checkpoint covers everything written so far.
	info, err := c.Info(ctx)
	if err != nil {
		return 0, nil, err
	}
	for info.CheckpointSize < info.Size {
		time.Sleep(50 * time.Millisecond)
		if info, err = c.Info(ctx); err != nil {
			return 0, nil, err
		}
	}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		idx := rand.Uint64N(info.CheckpointSize)
		start := time.Now()
		text, err := c.Proof(ctx, idx)
		if err != nil {
			return 0, nil, err
		}
		lat = append(lat, time.Since(start))
		if p, err := checkpoints.ParseTLogProof(text); err != nil || p.Index != idx {
			return 0, nil, fmt.Errorf("proof for %d: %v", idx, err)
		}
	}
	return info.CheckpointSize, lat, nil
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000)
}
