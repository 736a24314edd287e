package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/logserver"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// DefaultListen is loopback only: the kernel holds an agent's whole history.
const DefaultListen = "127.0.0.1:7420"

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "annald",
		Short:         "The Annal kernel: a verifiable history of every agent action",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newRebuildCommand(), newVerifyCommand(), newAuditCommand())
	return root
}

type serveFlags struct {
	data, listen, origin string
	checkpointInterval   time.Duration
	batchSize            uint
	batchAge             time.Duration
	logLevel             string
	strictDenials        bool
	noProduction         bool
	genesisEnergy        uint64
	energyPerTick        uint64
	tick                 time.Duration
	witnessPolicy        string
	witnessTimeout       time.Duration
	rateLimits           []string
	noRateLimit          bool
	killWebhook          string
	killTimeout          time.Duration
}

func newServeCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the kernel on a data folder (created on first start)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "./annal-data", "data folder: log, state, keys, credentials")
	fl.StringVar(&f.listen, "listen", DefaultListen, "address to listen on")
	fl.StringVar(&f.origin, "origin", "", "log origin, used on first start only (default: generated)")
	fl.DurationVar(&f.checkpointInterval, "checkpoint-interval", kernel.DefaultCheckpointInterval, "how often a checkpoint is signed (min 100ms)")
	fl.UintVar(&f.batchSize, "batch-size", kernel.DefaultBatchMaxSize, "Tessera batch: most entries written at once")
	fl.DurationVar(&f.batchAge, "batch-age", kernel.DefaultBatchMaxAge, "Tessera batch: longest an entry waits to be written")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.BoolVar(&f.strictDenials, "strict-denials", false, "record nothing for a denied action (the paper's strict INV-4); by default a denial is a zero-cost action.denied event")
	fl.BoolVar(&f.noProduction, "no-energy-production", false, "do not produce energy each tick")
	fl.Uint64Var(&f.genesisEnergy, "genesis-energy", event.DefaultEnergy.Genesis, "energy root holds at the start (first start only)")
	fl.Uint64Var(&f.energyPerTick, "energy-per-tick", event.DefaultEnergy.PerTick, "energy produced each tick, the configured capacity λ·Δt (first start only)")
	fl.StringVar(&f.witnessPolicy, "witness-policy", "", "c2sp.org/tlog-policy file: checkpoints are published only once its quorum of witnesses cosigned them")
	fl.DurationVar(&f.witnessTimeout, "witness-timeout", 10*time.Second, "how long to wait for a witness quorum before trying the next checkpoint")
	fl.StringArrayVar(&f.rateLimits, "rate-limit", nil, "RING=RATE/BURST, requests per second per agent of that ring, e.g. 2=20/40 (repeatable; default: the spec's 100/200, 50/100, 20/40, 5/10)")
	fl.BoolVar(&f.noRateLimit, "no-rate-limit", false, "turn the rate limit gate off")
	fl.StringVar(&f.killWebhook, "kill-webhook", "", "URL to POST {agent, session, reason} to when an agent is killed; a 2xx answer confirms termination")
	fl.DurationVar(&f.killTimeout, "kill-timeout", 5*time.Second, "how long the kill webhook may take (§12.5)")
	fl.DurationVar(&f.tick, "tick", time.Duration(event.DefaultEnergy.TickMillis)*time.Millisecond, "tick length Δt, in milliseconds or more (first start only)")
	return cmd
}

func serve(ctx context.Context, f serveFlags, stdout, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	klog.SetSlogLogger(logger.With("component", "tessera")) // one log stream, structured
	cfg := kernel.DefaultConfig(f.data)
	cfg.Origin = f.origin
	cfg.CheckpointInterval = f.checkpointInterval
	cfg.BatchMaxSize = f.batchSize
	cfg.BatchMaxAge = f.batchAge
	cfg.Logger = logger
	cfg.StrictDenials = f.strictDenials
	cfg.DisableProduction = f.noProduction
	cfg.Energy.Genesis = f.genesisEnergy
	cfg.Energy.PerTick = f.energyPerTick
	cfg.Energy.TickMillis = uint64(f.tick / time.Millisecond)
	cfg.DisableRateLimit = f.noRateLimit
	if len(f.rateLimits) > 0 {
		limits, err := parseRateLimits(f.rateLimits)
		if err != nil {
			return fmt.Errorf("--rate-limit: %w", err)
		}
		cfg.RateLimits = limits
	}
	if f.killWebhook != "" {
		cb, err := killWebhook(f.killWebhook)
		if err != nil {
			return fmt.Errorf("--kill-webhook: %w", err)
		}
		cfg.KillCallback, cfg.KillCallbackTimeout = cb, f.killTimeout
	}
	if f.witnessPolicy != "" {
		policy, err := os.ReadFile(f.witnessPolicy)
		if err != nil {
			return fmt.Errorf("--witness-policy: %w", err)
		}
		cfg.WitnessPolicy, cfg.WitnessTimeout = policy, f.witnessTimeout
	}
	k, err := kernel.Open(cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := k.Close(); err != nil {
			logger.Error("close kernel", "err", err)
		}
	}()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           logserver.New(k, logger),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	fmt.Fprintf(stdout, "annald: log %s\n", k.Origin())
	fmt.Fprintf(stdout, "annald: verifier key %s\n", k.VerifierKey())
	fmt.Fprintf(stdout, "annald: listening on http://%s\n", ln.Addr())
	fmt.Fprintf(stdout, "annald: root credential in %s\n", k.RootCredentialPath())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func newRebuildCommand() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Recompute the kernel state from the log alone, compare it with the state file, and replace the file",
		Long: `rebuild replays every log entry into a fresh state, compares it with the
state file (brought up to the log's size), prints what differed, and writes the
replayed state. annald must not be running on the folder. It exits 1 if the
state file differed from the replay.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			klog.SetOutput(io.Discard)
			klog.LogToStderr(false)
			cfg := kernel.DefaultConfig(data)
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			r, err := kernel.Rebuild(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "annald: replayed %d entries in %v (%.0f entries/s)\n", r.Size, r.Elapsed.Round(time.Millisecond), float64(r.Size)/max(r.Elapsed.Seconds(), 1e-9))
			if len(r.Differences) == 0 {
				fmt.Fprintf(out, "annald: the state file (folded to %d) equals the replay\n", r.StoredSize)
				return nil
			}
			for _, d := range r.Differences {
				fmt.Fprintf(out, "annald: differs: %s\n", d)
			}
			return fmt.Errorf("the state file differed from the log's replay in %d places; it now holds the replay", len(r.Differences))
		},
	}
	cmd.Flags().StringVar(&data, "data", "./annal-data", "data folder")
	return cmd
}

func newVerifyCommand() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check that the stored log still hashes to its latest signed checkpoint",
		Long: `verify reads every entry up to the latest checkpoint, parses it strictly, and
checks that the tree of their leaf hashes has the checkpoint's signed root: an
entry changed on disk after it was logged is found. annald must not be running
on the folder.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			klog.SetOutput(io.Discard)
			klog.LogToStderr(false)
			cfg := kernel.DefaultConfig(data)
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			cfg.DisableProduction = true
			k, err := kernel.Open(cfg)
			if err != nil {
				return err
			}
			defer k.Close()
			size, err := k.VerifyLog(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "annald: the %d entries of %s hash to its signed checkpoint\n", size, k.Origin())
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "./annal-data", "data folder")
	return cmd
}
