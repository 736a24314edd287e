package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/verifier"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// growthOptions are the growth mode's: the log sizes it measures at, and
// an optional second annald (an earlier build) whose proofs are measured
// on the same log at each stage.
type growthOptions struct {
	stages   []int
	clients  int
	baseline string
	// verifyN proofs of each stage are checked with the verifier
	// package: over HTTP, and every proof of the server-side phase.
	verifyN int
}

func growthCommand(o *options) *cobra.Command {
	var g growthOptions
	cmd := &cobra.Command{
		Use:   "growth",
		Short: "Fill one annald stage by stage and measure appends, receipts, proofs of random leaves and RSS at each size",
		Long: `annal-bench growth fills one annald (its own process) with root actions from --growth-clients
clients up to each --stages size, and at each stage measures: actions/s at --growth-clients clients,
the receipt p50 of one sequential client (beside the p50 of the write-ahead log's own durable write,
an overwrite and fdatasync in its folder, measured in halves between the receipts'), GET /v1/proof of random leaves across the whole log (proofs/s
at 64 clients after a warm-up of --duration, then p50 at one client), annald's memory (RSS split into anonymous
memory, mapped files and the state file's map; the Go heap's live size, goal and retained memory from its /metrics;
the highest RSS and state file map sampled each second); then it stops annald and opens the same folder in
this process to time the kernel's proof without HTTP (p50, warmed by one proof in every level-0 tile),
checking every such proof with the verifier package against the signed checkpoint. With
--baseline-annald, that annald (say, an earlier build) serves the same log after each stage and goes
through the same phases (appends, receipts, proofs, memory), for ratios in the same run. --cpuprofile P writes annald's profile of each
stage to P.<stage> (and the baseline's to P.<stage>.baseline): go tool pprof -focus handleProof shows
the proofs' part.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGrowth(cmd.Context(), *o, g, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&g.stages, "stages", []int{200_000, 1_000_000, 2_000_000}, "log sizes to measure at, ascending")
	f.IntVar(&g.clients, "growth-clients", 512, "clients that fill the log and whose append rate is measured")
	f.StringVar(&g.baseline, "baseline-annald", "", "an annald binary whose proofs are measured on the same log at each stage (\"\": none)")
	f.IntVar(&g.verifyN, "verify", 500, "proofs of each stage checked with the verifier package over HTTP (every server-side one is)")
	return cmd
}

// growthStage is what one stage measured.
type growthStage struct {
	size                 uint64
	serving              servingFigures
	serverP50, serverP99 time.Duration
	base                 servingFigures // the baseline annald's; zero without one
	fillSeconds          int64
}

// servingFigures are what one annald measured on the log as it stood:
// appends at the growth clients, receipts of one client, proofs, and its
// memory after them.
type servingFigures struct {
	append     float64
	receiptP50 time.Duration
	// syncP50 is the p50 of the write-ahead log's own durable write (an
	// overwrite and fdatasync of a lone receipt's size, in its folder),
	// measured in halves between the receipts' halves.
	syncP50 time.Duration
	proofs  proofFigures
	mem     annaldMemory
	// peakRSS and peakStateMap are the highest RSS and state file map
	// sampled while it ran, in KiB.
	peakRSS, peakStateMap int64
	// stateFile is the state file's size on disk after the phases, in
	// bytes: the ledger and the history index (0: not read).
	stateFile int64
}

// proofFigures are what httpProofs measured.
type proofFigures struct {
	size uint64
	rate float64
	// cpu is the annald CPU time a proof took in the phase of rate.
	cpu, p50 time.Duration
	// kept is how long after the warm-up annald still took to keep the
	// tops of every full level-0 tile (annal_proof_tiles_kept), which
	// the measured phases wait for; -1: annald does not say.
	kept time.Duration
}

func runGrowth(ctx context.Context, o options, g growthOptions, out io.Writer) error {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	for i, s := range g.stages {
		if s <= 0 || (i > 0 && s <= g.stages[i-1]) {
			return fmt.Errorf("--stages %v: positive and ascending", g.stages)
		}
	}
	dir, placement, cleanup, err := benchFolder(o.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	if o.annald, err = chooseAnnald(ctx, dir, o.annald, out); err != nil {
		return err
	}
	if o.annald == inProcess {
		return errors.New("growth measures annald's RSS: it needs annald as its own process, not --annald " + inProcess)
	}
	fmt.Fprintf(out, "annal-bench growth: stages %v, %d clients, %v per phase, log in %s%s\n\n", g.stages, g.clients, o.duration, dir, placement)
	data := filepath.Join(dir, "growth")
	var stages []growthStage
	for _, target := range g.stages {
		st, err := growthStep(ctx, data, o, g, uint64(target))
		if err != nil {
			return fmt.Errorf("stage %d: %w", target, err)
		}
		stages = append(stages, st)
		fmt.Fprintf(out, "stage %d done: fill %d s, proof tiles all kept %s after the warm-up\n", st.size, st.fillSeconds, keptWait(st.serving.proofs.kept))
	}
	return writeGrowthTable(out, stages, g.clients, g.baseline != "")
}

// growthStep starts annald on data (a new folder the first time), fills
// it to target entries, measures it, stops it, and measures the proofs
// of the same log in this process and with the baseline annald.
func growthStep(ctx context.Context, data string, o options, g growthOptions, target uint64) (growthStage, error) {
	var st growthStage
	base := o
	if o.cpuProfile != "" { // one profile a stage, each annald its own
		o.cpuProfile = fmt.Sprintf("%s.%d", o.cpuProfile, target)
		base.cpuProfile = o.cpuProfile + ".baseline"
	}
	p, err := startAnnald(ctx, o.annald, data, o)
	if err != nil {
		return st, err
	}
	defer p.stop()
	peaks := samplePeaks(p.cmd.Process.Pid, time.Second)
	fillStart := time.Now()
	if err := fillTo(ctx, p.url, p.cred, g.clients, target); err != nil {
		return st, err
	}
	st.fillSeconds = int64(time.Since(fillStart).Seconds())
	if st.serving, err = measureServing(ctx, p, o, g, data); err != nil {
		return st, err
	}
	st.serving.peakRSS, st.serving.peakStateMap = peaks()
	st.size = st.serving.proofs.size
	if err := p.stop(); err != nil {
		return st, err
	}
	if st.serverP50, st.serverP99, err = serverSideProofs(ctx, data, o, o.proofN); err != nil {
		return st, err
	}
	if g.baseline == "" {
		return st, nil
	}
	b, err := startAnnald(ctx, g.baseline, data, base)
	if err != nil {
		return st, fmt.Errorf("baseline annald: %w", err)
	}
	defer b.stop()
	peaks = samplePeaks(b.cmd.Process.Pid, time.Second)
	if st.base, err = measureServing(ctx, b, o, g, data); err != nil {
		return st, fmt.Errorf("baseline annald: %w", err)
	}
	st.base.peakRSS, st.base.peakStateMap = peaks()
	return st, b.stop()
}

// measureServing measures annald p on the log as it stands: actions/s at
// the growth clients, the receipt p50 of one client, proofs of random
// leaves, then its memory. The baseline annald goes through the same
// phases, so that its memory is read after the same kinds of load.
func measureServing(ctx context.Context, p *annaldProcess, o options, g growthOptions, data string) (f servingFigures, err error) {
	if f.append, err = mutateLoop(ctx, p.url, p.cred, g.clients, o.duration, growthTarget); err != nil {
		return f, err
	}
	if f.receiptP50, f.syncP50, err = receiptsBesideSync(ctx, p.url, p.cred, o.sequentialN, filepath.Join(data, walDirName)); err != nil {
		return f, err
	}
	if f.proofs, err = httpProofs(ctx, p.url, p.cpu, o, g.verifyN); err != nil {
		return f, err
	}
	f.mem = readAnnaldMemory(ctx, p.cmd.Process.Pid, p.url)
	if fi, err := os.Stat(filepath.Join(data, stateFileName)); err == nil {
		f.stateFile = fi.Size()
	}
	return f, nil
}

// receiptsBesideSync measures n receipts of one sequential client and n
// durable writes in the write-ahead log's own form (syncProbe's
// overwrite) in walDir, in halves, A, B, A, B, and returns both p50s.
func receiptsBesideSync(ctx context.Context, url, cred string, n int, walDir string) (receiptP50, syncP50 time.Duration, err error) {
	probe, err := newSyncProbe(walDir, lastWALWriteBytes(walDir), "overwrite")
	if err != nil {
		return 0, 0, err
	}
	defer probe.close()
	var receipts []time.Duration
	syncs := map[string][]time.Duration{}
	half := max(n/2, 1)
	for range 2 {
		lat, err := sequentialLatency(ctx, url, cred, half)
		if err != nil {
			return 0, 0, err
		}
		receipts = append(receipts, lat...)
		if err := probe.measure(half, syncs); err != nil {
			return 0, 0, err
		}
	}
	return percentile(receipts, 50), percentile(syncs["overwrite"], 50), nil
}

// fillTo submits root actions from clients clients until the log holds
// target entries, on growthTarget's targets.
func fillTo(ctx context.Context, url, cred string, clients int, target uint64) error {
	c, err := client.New(url, cred)
	if err != nil {
		return err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	if info.Size >= target {
		return nil
	}
	posters, err := newActionPosters(url, cred, clients)
	if err != nil {
		return err
	}
	defer closePosters(posters)
	todo := target - info.Size
	var next atomic.Uint64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			for i := next.Add(1); i <= todo; i = next.Add(1) {
				if err := posters[w].mutate(ctx, growthTarget(i), int(i)); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}

// growthTarget is action i's target: 4096 of them, repeating, so that
// what the kernel keeps per target does not grow with the log.
func growthTarget(i uint64) string { return "workspace/growth/" + strconv.FormatUint(i%4096, 10) }

// httpProofs measures GET /v1/proof of random leaves across the whole log
// under its latest checkpoint: proofs/s at proofClients clients (each
// proof parsed and of the leaf asked for) after a warm-up phase of the
// same length (what a server holds once it has served proofs a while),
// with the CPU time each took annald (cpu), then the p50 of one client; then it checks verifyN proofs with the
// verifier package against the checkpoint they carry.
func httpProofs(ctx context.Context, url string, cpu func() (time.Duration, error), o options, verifyN int) (f proofFigures, err error) {
	c, err := client.New(url, "")
	if err != nil {
		return f, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return f, err
	}
	clients := make([]*client.Client, proofClients)
	for i := range clients {
		if clients[i], err = client.New(url, ""); err != nil {
			return f, err
		}
	}
	size, lat, err := proofLatency(ctx, url, 1) // waits for a checkpoint of the whole log
	if err != nil {
		return f, err
	}
	ask := func(w int, _ uint64) error {
		idx := rand.Uint64N(size)
		text, err := clients[w].Proof(ctx, idx)
		if err != nil {
			return err
		}
		if p, err := checkpoints.ParseTLogProof(text); err != nil || p.Index != idx {
			return fmt.Errorf("proof for %d: %v", idx, err)
		}
		return nil
	}
	if _, err := closedLoop(proofClients, o.duration, ask); err != nil { // warm-up
		return f, err
	}
	if f.kept, err = awaitProofTiles(ctx, url); err != nil {
		return f, err
	}
	if f.rate, f.cpu, err = measureCPU(cpu, func() (float64, error) { return closedLoop(proofClients, o.duration, ask) }); err != nil {
		return f, err
	}
	if _, lat, err = proofLatency(ctx, url, o.proofN); err != nil {
		return f, err
	}
	f.size, f.p50 = size, percentile(lat, 50)
	return f, verifyHTTPProofs(ctx, c, size, verifyN, info.VerifierKey)
}

// verifyHTTPProofs checks the proofs of n random leaves of the first size
// with the verifier package, against the log key vkey.
func verifyHTTPProofs(ctx context.Context, c *client.Client, size uint64, n int, vkey string) error {
	for range n {
		idx := rand.Uint64N(size)
		text, err := c.Proof(ctx, idx)
		if err != nil {
			return err
		}
		entry, err := c.Event(ctx, idx)
		if err != nil {
			return err
		}
		if _, err := verifier.VerifyProof(entry, text, vkey); err != nil {
			return fmt.Errorf("proof of %d over HTTP: %w", idx, err)
		}
	}
	return nil
}

// serverSideProofs opens the log of data in this process and times the
// kernel's inclusion proof of n random leaves, without HTTP, after one
// proof in every level-0 tile (what a server that has served proofs for a
// while holds); every proof is checked with the verifier package.
func serverSideProofs(ctx context.Context, data string, o options, n int) (p50, p99 time.Duration, err error) {
	k, err := kernel.Open(benchConfig(data, o))
	if err != nil {
		return 0, 0, err
	}
	defer k.Close()
	cp, err := k.LatestCheckpoint(ctx)
	if err != nil {
		return 0, 0, err
	}
	for i := uint64(0); i < cp.Size; i += 256 {
		if _, err := k.InclusionProof(ctx, i); err != nil {
			return 0, 0, err
		}
	}
	vkey := k.VerifierKey()
	lat := make([]time.Duration, 0, n)
	for range n {
		idx := rand.Uint64N(cp.Size)
		start := time.Now()
		p, err := k.InclusionProof(ctx, idx)
		if err != nil {
			return 0, 0, err
		}
		lat = append(lat, time.Since(start))
		entry, err := k.Entry(ctx, idx)
		if err != nil {
			return 0, 0, err
		}
		if _, err := verifier.VerifyProof(entry, p.Marshal(), vkey); err != nil {
			return 0, 0, fmt.Errorf("proof of %d in process: %w", idx, err)
		}
	}
	return percentile(lat, 50), percentile(lat, 99), k.Close()
}

// receiptBesideSync is a receipt's p50, the same run's fdatasync p50 of
// the write-ahead log's form, and the ratio.
func receiptBesideSync(f servingFigures) string {
	if f.syncP50 <= 0 {
		return fmtDur(f.receiptP50)
	}
	return fmt.Sprintf("%s / %s = %.2fx", fmtDur(f.receiptP50), fmtDur(f.syncP50), float64(f.receiptP50)/float64(f.syncP50))
}

func writeGrowthTable(out io.Writer, stages []growthStage, clients int, baseline bool) error {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	head := "log size\tappend @%d\treceipt p50 @1 / fdatasync\tproof p50 @1 (HTTP)\tproofs/s @64\tannald CPU a proof\tserver-side proof p50 / p99\tannald RSS"
	if baseline {
		head += "\tbaseline: append\treceipt p50\tproof p50 @1\tproofs/s @64\tCPU a proof\tRSS"
	}
	fmt.Fprintf(tw, head+"\n", clients)
	for _, s := range stages {
		fmt.Fprintf(tw, "%d\t%.0f/s\t%s\t%s\t%.0f\t%s\t%s / %s\t%d MiB", s.size, s.serving.append, receiptBesideSync(s.serving), fmtMicros(s.serving.proofs.p50),
			s.serving.proofs.rate, fmtMicros(s.serving.proofs.cpu), fmtMicros(s.serverP50), fmtMicros(s.serverP99), s.serving.mem.total>>10)
		if baseline {
			b := s.base
			fmt.Fprintf(tw, "\t%.0f/s\t%s\t%s\t%.0f\t%s\t%d MiB", b.append, receiptBesideSync(b), fmtMicros(b.proofs.p50), b.proofs.rate, fmtMicros(b.proofs.cpu), b.mem.total>>10)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeGrowthMemory(out, stages, baseline); err != nil {
		return err
	}
	if len(stages) > 1 {
		first, last := stages[0], stages[len(stages)-1]
		fmt.Fprintf(out, "\nlast/first stage: proofs/s %.2fx, proof p50 %.2fx, CPU a proof %.2fx, server-side p50 %.2fx, RSS %.2fx",
			last.serving.proofs.rate/first.serving.proofs.rate, ratio(last.serving.proofs.p50, first.serving.proofs.p50), ratio(last.serving.proofs.cpu, first.serving.proofs.cpu),
			ratio(last.serverP50, first.serverP50), float64(last.serving.mem.total)/float64(first.serving.mem.total))
		if baseline {
			fmt.Fprintf(out, "; baseline proofs/s %.2fx, proof p50 %.2fx, CPU a proof %.2fx, RSS %.2fx",
				last.base.proofs.rate/first.base.proofs.rate, ratio(last.base.proofs.p50, first.base.proofs.p50), ratio(last.base.proofs.cpu, first.base.proofs.cpu),
				float64(last.base.mem.total)/float64(first.base.mem.total))
		}
		fmt.Fprintln(out)
	}
	return nil
}

// writeGrowthMemory is the table of where each stage's annald memory
// went, the baseline's beside it.
func writeGrowthMemory(out io.Writer, stages []growthStage, baseline bool) error {
	fmt.Fprintln(out, "\nannald memory after each stage's phases (anon: heap and stacks; file: mapped files, of which the state file's map):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	head := "log size\t" + memoryColumns + "\tpeak RSS / state.db map\tstate.db on disk"
	if baseline {
		head += "\tbaseline: " + memoryColumns + "\tpeak RSS / state.db map\tstate.db on disk"
	}
	fmt.Fprintln(tw, head)
	for _, s := range stages {
		fmt.Fprintf(tw, "%d\t%s\t%d / %d MiB\t%s", s.size, s.serving.mem, s.serving.peakRSS>>10, s.serving.peakStateMap>>10, fileSize(s.serving.stateFile))
		if baseline {
			fmt.Fprintf(tw, "\t%s\t%d / %d MiB\t%s", s.base.mem, s.base.peakRSS>>10, s.base.peakStateMap>>10, fileSize(s.base.stateFile))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// fileSize is n bytes in KiB below a MiB, else in MiB.
func fileSize(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func fmtMicros(d time.Duration) string {
	return fmt.Sprintf("%d µs", d.Microseconds())
}

// proofTilesWait bounds how long httpProofs waits for annald to keep
// every tile's top.
const proofTilesWait = 5 * time.Minute

// awaitProofTiles waits until annald keeps the tops of every full level-0
// tile of its log (annal_proof_tiles_kept reaches annal_proof_tiles_keepable:
// from then on a proof costs what it will for as long as annald runs), and
// says how long that took; -1 when annald's /metrics do not say (an
// earlier build), which is not waited for.
func awaitProofTiles(ctx context.Context, url string) (time.Duration, error) {
	start := time.Now()
	for {
		g, err := scrapeGauges(ctx, url+"/metrics", "annal_proof_tiles_kept", "annal_proof_tiles_keepable")
		if err != nil {
			return -1, nil
		}
		if g[0] >= g[1] {
			return time.Since(start), nil
		}
		if time.Since(start) > proofTilesWait {
			return 0, fmt.Errorf("annald kept %.0f of %.0f tiles' tops after %v", g[0], g[1], proofTilesWait)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func keptWait(d time.Duration) string {
	if d < 0 {
		return "(not reported)"
	}
	return d.Round(10 * time.Millisecond).String()
}
