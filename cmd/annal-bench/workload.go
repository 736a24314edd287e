package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/annal-dev/annal/internal/workload"
)

// workloadCommand runs internal/workload: the randomized concurrent
// workload over every request kind, for as long as asked.
func workloadCommand(o *options) *cobra.Command {
	cfg := workload.Config{Duration: time.Minute, Workers: workload.DefaultWorkers}
	var seed int64
	var refusals bool
	cmd := &cobra.Command{
		Use:   "workload",
		Short: "A randomized concurrent workload over every request kind, checked as it runs and at the end; prints operations by kind and outcome",
		Long: `annal-bench workload opens a kernel in this process on a new data folder, serves its API on
127.0.0.1, and has --workers workers send every request kind through the Go client for --duration
(or --ops operations): creations with shares, envelopes and delegation, actions committed, held,
denied and sealed, hold answers racing freezes, kills, revocations and require_signed, control and
signals, sessions and their grants and deltas, policies, elevation, sagas, signing keys, erasure,
execute intents and results, on a few objects so that they collide. It checks that /v1/readyz stays
200, that no answer is a 5xx, an unknown outcome or none, that answers are what was asked; and at
the end that the kernel's audit of the closed folder passes, that it opens again, that every
acknowledged receipt is in the log, and that its state equals a replay of the log. --seed makes the
workers' choices repeatable (the kernel's timing still varies). It exits 1 when a check broke,
printing the seed, the failures and the kernel's first errors. Operations (for --only, --skip):
` + strings.Join(workload.OpNames(), ", ") + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("seed") {
				seed = time.Now().UnixNano()
			}
			if seed < 0 {
				return fmt.Errorf("--seed %d: 0 or more", seed)
			}
			cfg.Seed, cfg.Dir = uint64(seed), o.dir
			if !cmd.Flags().Changed("restarts") {
				cfg.Restarts = int(cfg.Duration / (30 * time.Second)) // one every half minute
			}
			return runWorkload(cmd, cfg, refusals)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&seed, "seed", 0, "the seed of the workers' choices (default: the time, printed)")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the workers run (0: --ops alone bounds the run)")
	f.Int64Var(&cfg.MaxOps, "ops", 0, "stop after this many operations (0: --duration alone bounds the run)")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent workers")
	f.IntVar(&cfg.Restarts, "restarts", cfg.Restarts, "restarts of the kernel during the run, evenly spaced (default: one per 30 s of --duration)")
	f.StringSliceVar(&cfg.Only, "only", nil, "draw only these operations (agents are still created when too few are alive)")
	f.StringSliceVar(&cfg.Skip, "skip", nil, "never draw these operations")
	f.BoolVar(&cfg.KeepData, "keep", false, "keep the data folder (under --dir) for annald audit, rebuild or a look")
	f.BoolVar(&refusals, "refusals", false, "print every refusal with the kernel's message on stderr")
	return cmd
}

func runWorkload(cmd *cobra.Command, cfg workload.Config, refusals bool) error {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	cfg.Refusals = refusals
	cfg.Progress = func(line string) { fmt.Fprintln(errOut, line) }
	fmt.Fprintf(out, "annal-bench workload: seed %d, %d workers, %v, %d ops at most, %d restarts\n\n", cfg.Seed, cfg.Workers, cfg.Duration, cfg.MaxOps, cfg.Restarts)
	// An interrupt ends the workers; the checks of the end still run.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	rep, err := workload.Run(ctx, cfg)
	if err != nil {
		return err
	}
	rep.WriteTable(out)
	if rep.Failed() {
		return fmt.Errorf("the workload found %d failures; repeat the workers' choices with --seed %d", rep.FailureCount, rep.Seed)
	}
	return nil
}
