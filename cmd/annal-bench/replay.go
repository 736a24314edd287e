package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/annal-dev/annal/internal/cli"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// replayOptions are the replay mode's: the log it replays (filled to
// events governed actions unless data already holds one), the annald
// binaries it times, and how many interleaved rounds.
type replayOptions struct {
	events   int
	data     string
	annald   string
	baseline string
	rounds   int
	profile  string
}

func replayCommand(o *options) *cobra.Command {
	var r replayOptions
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Time annald rebuild and annald audit of one log, each against a baseline annald, interleaved",
		Long: `annal-bench replay fills a data folder with --replay-events governed actions from 64 agents
(in this process; a --replay-data folder that already holds a log is used as it is), then runs
annald rebuild --data and annald audit --data on it, --rounds times, the --baseline-annald's and
this annald's in turn (A, B, A, B), and prints each one's entries/s (the process's wall time, and
the replay's own elapsed time as the command reports it) and the ratios of the means.
--cpuprofile P then runs the rebuild and the audit once more in this process and writes their
CPU profiles to P.rebuild and P.audit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			klog.SetOutput(io.Discard)
			klog.LogToStderr(false)
			return runReplay(cmd.Context(), *o, r, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&r.events, "replay-events", 1_000_000, "governed actions to fill a new log with")
	f.StringVar(&r.data, "replay-data", "", "data folder to replay (default: a new one under --dir); filled first if it holds no log")
	f.StringVar(&r.annald, "replay-annald", "", "the annald binary to time (default: built from this module)")
	f.StringVar(&r.baseline, "baseline-annald", "", "an annald binary (say, an earlier build) timed on the same log in turn (\"\": none)")
	f.IntVar(&r.rounds, "replay-rounds", 2, "rounds of (baseline, this) rebuild and audit")
	f.StringVar(&r.profile, "replay-cpuprofile", "", "write CPU profiles of one in-process rebuild and audit to this path .rebuild and .audit")
	return cmd
}

// replayTiming is one run of annald rebuild or audit: entries replayed,
// the process's wall time, the replay's own elapsed time, and CPU time.
type replayTiming struct {
	size          uint64
	wall, elapsed time.Duration
	// cpu is the process's CPU time, user and system: what a busy
	// machine's other processes cannot take from it.
	cpu time.Duration
}

func runReplay(ctx context.Context, o options, r replayOptions, out io.Writer) error {
	if r.rounds < 1 {
		return fmt.Errorf("--replay-rounds %d: 1 or more", r.rounds)
	}
	dir, _, cleanup, err := benchFolder(o.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	if r.data == "" {
		r.data = filepath.Join(dir, "replay")
	}
	if err := fillReplayLog(ctx, r.data, r.events, o, out); err != nil {
		return err
	}
	if r.annald == "" {
		if r.annald, err = findAnnald(ctx, dir); err != nil {
			return err
		}
	}
	bins := []struct{ name, path string }{{"baseline", r.baseline}, {"this", r.annald}}
	if r.baseline == "" {
		bins = bins[1:]
	}
	fmt.Fprintf(out, "annal-bench replay of %s: %s\n", r.data, loadAverage())
	runs := map[string][]replayTiming{}
	for round := range r.rounds {
		for _, b := range bins {
			for _, what := range []string{"rebuild", "audit"} {
				t, err := timeReplay(ctx, b.path, what, r.data)
				if err != nil {
					return fmt.Errorf("%s %s: %w", b.name, what, err)
				}
				key := b.name + " " + what
				runs[key] = append(runs[key], t)
				fmt.Fprintf(out, "round %d %-16s %d entries: %8.0f entries/s wall, %8.0f entries/s replay, %8.0f entries/CPU-s\n", round+1, key, t.size, rate(t.size, t.wall), rate(t.size, t.elapsed), rate(t.size, t.cpu))
			}
		}
	}
	fmt.Fprintf(out, "after the rounds: %s\n\n", loadAverage())
	if err := printReplay(out, runs, len(bins) == 2); err != nil {
		return err
	}
	if r.profile != "" {
		return profileReplay(ctx, o, r.data, r.profile)
	}
	return nil
}

// fillReplayLog writes n governed actions from 64 agents into a new log at
// data, as the rebuild phase does, unless data holds a log already.
func fillReplayLog(ctx context.Context, data string, n int, o options, out io.Writer) error {
	if _, err := os.Stat(filepath.Join(data, "origin")); err == nil {
		return nil
	}
	cfg := benchConfig(data, o)
	cfg.DisableProduction = true
	k, err := kernel.Open(cfg)
	if err != nil {
		return err
	}
	root, err := k.Actor(kernel.RootID)
	if err != nil {
		return errors.Join(err, k.Close())
	}
	const workers = 64
	agents, err := rebuildAgents(ctx, k, root, workers)
	if err != nil {
		return errors.Join(err, k.Close())
	}
	start := time.Now()
	werr := inParallel(int64(n), workers, func(w int, i int64) error {
		_, err := k.Submit(ctx, agents[w], kernel.ActionRequest{Type: event.Mutate, Target: "workspace/r/" + strconv.FormatInt(i, 10)})
		return err
	})
	if err := errors.Join(werr, k.Close()); err != nil {
		return err
	}
	fmt.Fprintf(out, "filled %s with %d governed actions in %v\n", data, n, time.Since(start).Round(time.Second))
	return nil
}

// replayedLine is what annald rebuild prints about its replay.
var replayedLine = regexp.MustCompile(`replayed (\d+) entries in (\S+) `)

// timeReplay runs `annald what --data data` (rebuild or audit) and reads
// the replay's size and elapsed time from what it prints.
func timeReplay(ctx context.Context, bin, what, data string) (replayTiming, error) {
	args := []string{what, "--data", data}
	if what == "audit" {
		args = append(args, "--json")
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, bin, args...)
	outb, err := cmd.Output()
	t := replayTiming{wall: time.Since(start)}
	if ps := cmd.ProcessState; ps != nil {
		t.cpu = ps.UserTime() + ps.SystemTime()
	}
	if err != nil {
		return t, fmt.Errorf("%v: %s", err, outb)
	}
	if what == "audit" {
		var rep struct {
			Size     uint64        `json:"size"`
			Unsigned uint64        `json:"unsigned"`
			Folded   uint64        `json:"folded"`
			Elapsed  time.Duration `json:"elapsed_ns"`
		}
		if err := json.Unmarshal(outb, &rep); err != nil {
			return t, fmt.Errorf("audit report: %v", err)
		}
		if rep.Folded != rep.Size+rep.Unsigned {
			return t, fmt.Errorf("audit folded %d of %d entries", rep.Folded, rep.Size+rep.Unsigned)
		}
		t.size, t.elapsed = rep.Size+rep.Unsigned, rep.Elapsed
		return t, nil
	}
	m := replayedLine.FindSubmatch(outb)
	if m == nil {
		return t, fmt.Errorf("no replay figures in %q", outb)
	}
	t.size, _ = strconv.ParseUint(string(m[1]), 10, 64)
	t.elapsed, err = time.ParseDuration(string(m[2]))
	return t, err
}

// printReplay prints the mean rates of each binary's rebuild and audit,
// and with a baseline the ratios of this annald's means to its.
func printReplay(out io.Writer, runs map[string][]replayTiming, ratios bool) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tentries\twall entries/s\treplay entries/s\tentries/CPU-s\tratio (wall, replay, CPU)")
	for _, what := range []string{"rebuild", "audit"} {
		for _, name := range []string{"baseline", "this"} {
			ts := runs[name+" "+what]
			if len(ts) == 0 {
				continue
			}
			w, e, c := meanRates(ts)
			ratio := ""
			if base := runs["baseline "+what]; ratios && name == "this" {
				bw, be, bc := meanRates(base)
				ratio = fmt.Sprintf("%.2fx, %.2fx, %.2fx", w/bw, e/be, c/bc)
			}
			fmt.Fprintf(tw, "%s %s\t%d\t%.0f\t%.0f\t%.0f\t%s\n", name, what, ts[0].size, w, e, c, ratio)
		}
	}
	return tw.Flush()
}

// meanRates are the mean entries/s of ts, by wall, replay and CPU time.
func meanRates(ts []replayTiming) (wall, replay, cpu float64) {
	for _, t := range ts {
		wall += rate(t.size, t.wall)
		replay += rate(t.size, t.elapsed)
		cpu += rate(t.size, t.cpu)
	}
	n := float64(len(ts))
	return wall / n, replay / n, cpu / n
}

func rate(n uint64, d time.Duration) float64 { return float64(n) / max(d.Seconds(), 1e-9) }

// loadAverage is the machine's load average, as /proc/loadavg gives it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	return "load average " + string(b[:len(b)-1])
}

// profileReplay runs a rebuild and an audit of data in this process, each
// under a CPU profile (path.rebuild, path.audit).
func profileReplay(ctx context.Context, o options, data, path string) error {
	stop, err := cli.StartCPUProfile(path + ".rebuild")
	if err != nil {
		return err
	}
	cfg := benchConfig(data, o)
	_, err = kernel.Rebuild(ctx, cfg)
	stop()
	if err != nil {
		return err
	}
	key, err := kernel.LocalVerifierKey(data)
	if err != nil {
		return err
	}
	if stop, err = cli.StartCPUProfile(path + ".audit"); err != nil {
		return err
	}
	defer stop()
	_, err = kernel.Audit(ctx, kernel.LocalLog(data), key, kernel.WithSealedPayloads(data), kernel.WithUnsignedTail(data))
	return err
}
