// Command annal-witness-bench compares the add-checkpoint rate of
// annal-witness with omniwitness's, in one run, on the same workload.
//
// It builds ./cmd/annal-witness from this module and
// github.com/transparency-dev/witness/cmd/omniwitness at the version the
// issue names (from the module proxy, out of this module's tree), or takes
// prebuilt binaries. Each witness runs as a subprocess on 127.0.0.1 with
// fresh state in a temporary folder and durable storage: annal-witness in
// a checkpoint journal beside bbolt, one fdatasync per group commit;
// omniwitness in sqlite in WAL mode with
// synchronous=FULL, one fsync per transaction, one transaction per
// request. Both answer only after the commit.
//
// Both are configured for the same logs (annal-witness with `logs add`,
// omniwitness with an -additional_logs file; omniwitness also loads its
// built-in list of public logs, which no flag turns off and which this
// workload never touches) and fed the same workload: one client goroutine
// per log, all at once, each growing its log's Merkle tree by 1 to
// --max-grow entries per step and sending one c2sp.org/tlog-witness
// add-checkpoint request per step, from the witness's size, with the
// consistency proof and a checkpoint signed with the log's Ed25519 key.
// The requests of the path on which every step is cosigned are made
// before any witness is measured (--prepare), the same bytes for every
// witness: signing a checkpoint and proving consistency take the client
// about as much CPU as cosigning takes a witness, on the same cores, and
// would otherwise be measured with it. A request off that path (after a
// 409) or beyond it is made when it is sent, and counted.
// Only 200 answers count as throughput; every other answer is an error. A
// 409 is retried at once from the size in its body, anything else (429 is
// omniwitness's pushback) after a backoff. Latency is per step: from its
// first request to its 200, retries included.
//
// omniwitness is measured twice: with its defaults, and with
// --db_max_conns=1, its own flag, with which it queues concurrent requests
// instead of refusing most of them with 429 (see tunedFlag). The target is
// judged against the faster of the two.
//
// Every witness is measured --rounds times, interleaved, each time with
// fresh state, the order reversed every other round (A, B, C, C, B, A, A,
// …): a witness measured right after another (its disk writes still being
// flushed, its memory just freed) is each witness in turn. It prints the machine, one row per witness
// and round, and the ratios by round and of the means; the target is
// judged on the ratio of the means.
// Subprocesses and temporary folders are removed on exit and on Ctrl-C.
package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/annal-dev/annal/internal/cli"

	"github.com/spf13/cobra"
)

func main() {
	cmd := newCommand()
	cli.Setup(cmd)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "annal-witness-bench:", err)
		os.Exit(1)
	}
}

// Defaults of the flags.
const (
	DefaultLogs     = 64
	DefaultDuration = 10 * time.Second
	DefaultMaxGrow  = 16
	DefaultTimeout  = 30 * time.Second
	// DefaultMaxAttempts bounds the requests sent for one step.
	DefaultMaxAttempts = 1000
	// DefaultBackoff is the base of the wait before retrying a step after
	// an answer other than 200 and 409.
	DefaultBackoff = time.Millisecond
	// DefaultRounds: every witness is measured twice, interleaved, so that
	// a drift of the shared machine's speed falls on all of them.
	DefaultRounds = 2
	// DefaultPreparedRate sizes --prepare's default: the requests per
	// second, all logs together, prepared for the whole --duration; about
	// 1.5 times the fastest witness measured here (annal-witness with
	// --mldsa=false, ~10,000/s).
	DefaultPreparedRate = 15_000
	// targetRatio is issue 17's target: annal-witness at least 2.5 times
	// the rate of omniwitness at its best setting.
	targetRatio = 2.5
	// oneClientTargetRatio is issue 41's target with one log, so one
	// client, where a request's own path is all there is to measure: at
	// least omniwitness's rate.
	oneClientTargetRatio = 1.0
)

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// targetFor is the target ratio of a run of logs logs.
func targetFor(logs int) float64 {
	if logs == 1 {
		return oneClientTargetRatio
	}
	return targetRatio
}

type options struct {
	logs             int
	duration         time.Duration
	steps            int
	maxGrow          int
	timeout          time.Duration
	backoff          time.Duration
	prepare          int
	rounds           int
	dir              string
	annalWitness     string
	annalWitnessArgs []string
	omniwitness      string
	skipOmniwitness  bool
	omniwitnessArgs  []string
	omniwitnessTuned bool
}

// tunedFlag is omniwitness's own flag that keeps it from refusing
// concurrent requests: with one sqlite connection, requests of different
// logs wait for it in database/sql's pool, one transaction (and one
// fsync) at a time, instead of failing with SQLITE_BUSY, which it answers
// with 429. Its default is 1000 connections.
const tunedFlag = "--db_max_conns=1"

func newCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "annal-witness-bench",
		Short: "Compare add-checkpoint/s of annal-witness and omniwitness on the same workload",
		Long: `annal-witness-bench runs annal-witness and omniwitness one after the other on
127.0.0.1, each with fresh durable state, feeds both the same add-checkpoint
workload (--logs logs, one client each, all at once, for --duration or --steps)
and prints add-checkpoint/s, latency and errors of each, and their ratio.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.logs, "logs", DefaultLogs, "logs, each with its own key and its own client goroutine")
	f.DurationVar(&o.duration, "duration", DefaultDuration, "length of each witness's measurement")
	f.IntVar(&o.steps, "steps", 0, "steps per log (0: as many as --duration allows; --duration still bounds)")
	f.IntVar(&o.maxGrow, "max-grow", DefaultMaxGrow, "a step adds 1 to this many entries to the log")
	f.DurationVar(&o.timeout, "timeout", DefaultTimeout, "bound on one request")
	f.DurationVar(&o.backoff, "backoff", DefaultBackoff, "after the n-th refusal of a step other than 409 (e.g. 429, a witness's pushback), wait n×this (at most 50ms) before retrying; 0 retries at once")
	f.IntVar(&o.prepare, "prepare", -1, fmt.Sprintf("requests per log made (signed, with their proofs) before measuring, so the client's CPU goes to sending them; -1: --steps, or enough for %d/s for --duration; 0: made while measuring", DefaultPreparedRate))
	f.IntVar(&o.rounds, "rounds", DefaultRounds, "measure every witness this many times, interleaved, in reverse order every other round (A, B, C, C, B, A, …); the ratios are of the means")
	f.StringVar(&o.dir, "dir", "", "folder in which the temporary state folder is made (default: the system's); use the disk you want measured")
	f.StringVar(&o.annalWitness, "annal-witness", "", "prebuilt annal-witness binary (default: go build "+annalWitnessPackage+")")
	f.StringVar(&o.omniwitness, "omniwitness", "", "prebuilt omniwitness binary (default: go install "+omniwitnessPackage+"@"+omniwitnessVersion+")")
	f.StringArrayVar(&o.annalWitnessArgs, "annal-witness-arg", nil, "extra flag for annal-witness serve, e.g. --annal-witness-arg=--mldsa=false (repeatable)")
	f.StringArrayVar(&o.omniwitnessArgs, "omniwitness-arg", nil, "extra flag for omniwitness, e.g. --omniwitness-arg=--db_max_conns=1 (repeatable)")
	f.BoolVar(&o.omniwitnessTuned, "omniwitness-tuned", true, "also measure omniwitness with "+tunedFlag+" (no 429s under concurrency)")
	f.BoolVar(&o.skipOmniwitness, "skip-omniwitness", false, "measure annal-witness only")
	return cmd
}

func (o options) validate() error {
	switch {
	case o.logs < 1:
		return fmt.Errorf("--logs %d: at least 1", o.logs)
	case o.duration <= 0:
		return fmt.Errorf("--duration %v: must be positive", o.duration)
	case o.steps < 0:
		return fmt.Errorf("--steps %d: 0 or more", o.steps)
	case o.maxGrow < 1:
		return fmt.Errorf("--max-grow %d: at least 1", o.maxGrow)
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %v: must be positive", o.timeout)
	case o.backoff < 0:
		return fmt.Errorf("--backoff %v: 0 or more", o.backoff)
	case o.rounds < 1:
		return fmt.Errorf("--rounds %d: at least 1", o.rounds)
	case o.prepare < -1:
		return fmt.Errorf("--prepare %d: -1 (automatic), 0 or more", o.prepare)
	}
	return nil
}

// preparedSteps is how many requests per log are made before measuring.
func (o options) preparedSteps() int {
	switch {
	case o.prepare >= 0:
		return o.prepare
	case o.steps > 0:
		return o.steps
	}
	return int(math.Ceil(o.duration.Seconds() * DefaultPreparedRate / float64(o.logs)))
}

func run(ctx context.Context, o options, out, progress io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(o.dir, "annal-witness-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	awBin, owBin, err := o.binaries(ctx, dir, progress)
	if err != nil {
		return err
	}
	logs, err := newBenchLogs(o.logs)
	if err != nil {
		return err
	}
	prepare := o.preparedSteps()
	if prepare > 0 {
		fmt.Fprintf(progress, "preparing %d requests per log …\n", prepare)
		if err := prepareLogs(logs, o.maxGrow, prepare); err != nil {
			return err
		}
		settleAfterPreparing()
	}
	wl := workload{duration: o.duration, steps: o.steps, maxGrow: o.maxGrow, timeout: o.timeout, maxAttempts: DefaultMaxAttempts, backoff: o.backoff}
	o.printSetup(out, dir, awBin, owBin, prepare)
	results, err := measureRounds(ctx, o, wl, dir, o.sides(awBin, owBin, logs), logs, progress)
	if err != nil {
		return err
	}
	return printResults(out, results)
}

// settleAfterPreparing collects the preparation's garbage and pauses
// before the first witness is measured. Why: preparing is seconds of
// signing and hashing, and the first measurement (annal-witness's, in
// round 1) otherwise ran with the collector catching up on it and with
// this process just off a long run of processor time, which a shared
// machine's scheduler makes it wait for: round 1 was the lowest ratio of
// its run in 6 of 10 runs with one client on 2026-11-28.
func settleAfterPreparing() {
	runtime.GC()
	time.Sleep(time.Second)
}

// binaries are the witnesses' binaries: given, else built into dir.
func (o options) binaries(ctx context.Context, dir string, progress io.Writer) (awBin, owBin string, err error) {
	awBin = o.annalWitness
	if awBin == "" {
		fmt.Fprintln(progress, "building annal-witness …")
		if awBin, err = buildAnnalWitness(ctx, dir); err != nil {
			return "", "", err
		}
	}
	owBin = o.omniwitness
	if owBin == "" && !o.skipOmniwitness {
		fmt.Fprintf(progress, "building omniwitness %s from the module proxy (1–2 minutes the first time) …\n", omniwitnessVersion)
		if owBin, err = buildOmniwitness(ctx, dir); err != nil {
			return "", "", err
		}
	}
	return awBin, owBin, nil
}

// printSetup prints the header: the machine, the binaries, the workload.
func (o options) printSetup(out io.Writer, dir, awBin, owBin string, prepare int) {
	fmt.Fprintf(out, "annal-witness-bench: %d CPUs (%s/%s, GOMAXPROCS %d), %s; state in %s\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.Version(), dir)
	fmt.Fprintf(out, "  annal-witness: %s\n", describeBinary(awBin))
	if !o.skipOmniwitness {
		fmt.Fprintf(out, "  omniwitness:   %s\n", describeBinary(owBin))
	}
	stepsText := "as many steps as fit"
	if o.steps > 0 {
		stepsText = fmt.Sprintf("%d steps per log", o.steps)
	}
	fmt.Fprintf(out, "  workload: %d logs, one client each, all at once; +1..%d entries per step; %s in at most %v per witness; retry backoff %v\n",
		o.logs, o.maxGrow, stepsText, o.duration, o.backoff)
	fmt.Fprintf(out, "  prepared before measuring: the first %d requests of each log (the same bytes for every witness); others are made when sent\n\n", prepare)
}

// side is one witness configuration measured: its name, its state
// folders' prefix, and how to start it on a state folder.
type side struct {
	name  string
	dir   string
	start func(ctx context.Context, dir string) (*witnessProcess, error)
}

// sides are the configurations measured, in the order of every round:
// annal-witness, then omniwitness as is and tuned, unless skipped.
func (o options) sides(awBin, owBin string, logs []*benchLog) []side {
	sides := []side{{"annal-witness", "annal", func(ctx context.Context, d string) (*witnessProcess, error) {
		return startAnnalWitness(ctx, awBin, d, logs, o.annalWitnessArgs...)
	}}}
	if o.skipOmniwitness {
		return sides
	}
	sides = append(sides, side{"omniwitness", "omni", func(ctx context.Context, d string) (*witnessProcess, error) {
		return startOmniwitness(ctx, owBin, d, logs, o.omniwitnessArgs)
	}})
	if o.omniwitnessTuned {
		sides = append(sides, side{"omniwitness " + tunedFlag, "omni-tuned", func(ctx context.Context, d string) (*witnessProcess, error) {
			return startOmniwitness(ctx, owBin, d, logs, append([]string{tunedFlag}, o.omniwitnessArgs...))
		}})
	}
	return sides
}

// measureRounds measures every side in each of o.rounds rounds, each on a
// fresh state folder under dir, in roundOrder.
func measureRounds(ctx context.Context, o options, wl workload, dir string, sides []side, logs []*benchLog, progress io.Writer) ([]*measurement, error) {
	var results []*measurement
	for round := 1; round <= o.rounds; round++ {
		for _, s := range roundOrder(sides, round) {
			d := filepath.Join(dir, fmt.Sprintf("%s-%d", s.dir, round))
			if err := os.Mkdir(d, 0o700); err != nil {
				return nil, err
			}
			fmt.Fprintf(progress, "measuring %s, round %d of %d …\n", s.name, round, o.rounds)
			m, err := measure(ctx, wl, s.name, logs, func(ctx context.Context) (*witnessProcess, error) { return s.start(ctx, d) })
			if err != nil {
				return nil, err
			}
			m.round = round
			results = append(results, m)
		}
	}
	return results, nil
}

// roundOrder is the order of the sides in round (from 1): as given in odd
// rounds, reversed in even ones.
func roundOrder(sides []side, round int) []side {
	if round%2 == 1 {
		return sides
	}
	reversed := slices.Clone(sides)
	slices.Reverse(reversed)
	return reversed
}

// measure starts a witness, runs the workload against it, and stops it.
func measure(ctx context.Context, wl workload, name string, logs []*benchLog, start func(context.Context) (*witnessProcess, error)) (*measurement, error) {
	p, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	pid := p.cmd.Process.Pid
	s0, serr := processCPU(pid)
	c0, cerr := processCPU(0)
	m := wl.run(ctx, name, p.url, logs)
	if s1, err := processCPU(pid); err == nil && serr == nil {
		m.serverCPU = s1 - s0
	}
	if c1, err := processCPU(0); err == nil && cerr == nil {
		m.clientCPU = c1 - c0
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-p.exited:
		return nil, p.failure(errors.New("exited during the measurement"))
	default:
	}
	return m, nil
}

// describeBinary names a binary's path, Go version and main module version.
func describeBinary(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("%s (no build info: %v)", path, err)
	}
	return fmt.Sprintf("%s (%s, %s %s)", path, bi.GoVersion, bi.Main.Path, bi.Main.Version)
}

// printResults prints a row per measurement, then each omniwitness
// configuration's ratio, round by round and of the means over the rounds,
// and the target's verdict on the ratio of the means against the fastest
// configuration. results[0] is annal-witness's first round.
func printResults(out io.Writer, results []*measurement) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "witness\tround\tlogs\trequests\tcosigned (200)\tadd-checkpoint/s\tp50\tp99\terrors\tretries\twitness CPU\tbench CPU\t")
	for _, m := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.0f\t%s\t%s\t%d\t%d\t%s\t%s\t\n",
			m.witness, m.round, m.logs, m.sent, m.ok, m.rate(),
			fmtDur(percentile(m.latencies, 50)), fmtDur(percentile(m.latencies, 99)),
			m.errorCount(), m.retries, fmtCores(m.serverCPU, m.elapsed), fmtCores(m.clientCPU, m.elapsed))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	for _, m := range results {
		printDetails(out, m)
	}
	printRatios(out, results)
	return nil
}

// printDetails prints what a measurement's row leaves out: its length,
// its errors, its CPU per cosignature, the logs that stopped early.
func printDetails(out io.Writer, m *measurement) {
	fmt.Fprintf(out, "%s, round %d: %d requests in %v (%d made while measuring); errors: %s", m.witness, m.round, m.sent, m.elapsed.Round(time.Millisecond), m.madeLive, m.errorSummary())
	if m.ok > 0 && m.serverCPU > 0 {
		fmt.Fprintf(out, "; witness CPU %s per cosignature", fmtDur(m.serverCPU/time.Duration(m.ok)))
	}
	if len(m.latencies) > 0 {
		fmt.Fprintf(out, "; latency mean %s, p90 %s, %s of the time in answers over 1 ms", fmtDur(mean(m.latencies)), fmtDur(percentile(m.latencies, 90)), fmtShare(slowShare(m.latencies, time.Millisecond)))
	}
	fmt.Fprintln(out)
	for _, g := range m.gaveUp {
		fmt.Fprintf(out, "  stopped early: %s\n", g)
	}
}

// printRatios prints annal-witness's ratio to each other witness, round by
// round and of the means, then the target's verdict against the fastest.
func printRatios(out io.Writer, results []*measurement) {
	// Each witness's rounds, in the order the witnesses were measured.
	var names []string
	rounds := map[string][]*measurement{}
	for _, m := range results {
		if _, ok := rounds[m.witness]; !ok {
			names = append(names, m.witness)
		}
		rounds[m.witness] = append(rounds[m.witness], m)
	}
	annal := rounds[names[0]]
	// The target is judged against the fastest omniwitness configuration.
	best, bestMean := "", 0.0
	for _, name := range names[1:] {
		other := rounds[name]
		var each []string
		for i := range min(len(annal), len(other)) {
			each = append(each, fmtRatio(annal[i], other[i]))
		}
		fmt.Fprintf(out, "\nratio %s / %s: %s by round; %s of the means", names[0], name, strings.Join(each, ", "), fmtMeanRatio(meanRate(annal), meanRate(other)))
		if m := meanRate(other); m > bestMean {
			best, bestMean = name, m
		}
	}
	if bestMean > 0 {
		printVerdict(out, annal, best, rounds[best])
	}
}

// printVerdict prints whether annal-witness met the target against the
// fastest other witness, best: by the ratio of the means, and round by
// round.
func printVerdict(out io.Writer, annal []*measurement, best string, bestRounds []*measurement) {
	ratio := meanRate(annal) / meanRate(bestRounds)
	target := targetFor(annal[0].logs)
	met := 0
	for i, m := range annal {
		if i < len(bestRounds) && bestRounds[i].rate() > 0 && m.rate()/bestRounds[i].rate() >= target {
			met++
		}
	}
	verdict := "met"
	if ratio < target {
		verdict = "NOT met"
	}
	fmt.Fprintf(out, "\ntarget annal-witness ≥ %.1f× the fastest omniwitness (%s) with %s, means of %d rounds: %.2f×, %s (met in %d of %d rounds)\n",
		target, best, plural(annal[0].logs, "log"), len(annal), ratio, verdict, met, len(annal))
}

// meanRate is the mean of the measurements' rates.
func meanRate(ms []*measurement) float64 {
	sum := 0.0
	for _, m := range ms {
		sum += m.rate()
	}
	return sum / float64(len(ms))
}

func fmtMeanRatio(a, b float64) string {
	if b <= 0 {
		return "– (no cosignature)"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func fmtRatio(a, b *measurement) string {
	if b.rate() <= 0 {
		return "– (no cosignature)"
	}
	return fmt.Sprintf("%.2f×", a.rate()/b.rate())
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
}

// fmtCores is CPU time over wall time: how many cores were busy on average.
func fmtCores(cpu, wall time.Duration) string {
	if cpu <= 0 || wall <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f cores", cpu.Seconds()/wall.Seconds())
}
