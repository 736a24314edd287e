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
	root.AddCommand(newServeCommand())
	return root
}

type serveFlags struct {
	data, listen, origin string
	checkpointInterval   time.Duration
	batchSize            uint
	batchAge             time.Duration
	logLevel             string
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
