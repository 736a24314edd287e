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
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/annal-dev/annal/blobstore"

	"github.com/annal-dev/annal/agentmcp"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/cli"
	"github.com/annal-dev/annal/internal/fastpost"
	"github.com/annal-dev/annal/internal/gcgoal"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/netutil"
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
	root.AddCommand(newServeCommand(), newRebuildCommand(), newVerifyCommand(), newRepairCommand(), newAuditCommand(), newTolerateCommand())
	cli.Setup(root)
	return root
}

type serveFlags struct {
	data, listen, origin string
	checkpointInterval   time.Duration
	// checkpointIntervalSet: --checkpoint-interval was given.
	checkpointIntervalSet bool
	batchSize             uint
	batchAge              time.Duration
	noWriteAhead          bool
	logLevel              string
	strictDenials         bool
	noProduction          bool
	genesisEnergy         uint64
	energyPerTick         uint64
	tick                  time.Duration
	witnessPolicy         string
	tlsCert, tlsKey       string
	keepBlobs             bool
	maxBlob, blobQuota    int64
	secureCookies         bool
	witnessTimeout        time.Duration
	rateLimits            []string
	noRateLimit           bool
	killWebhook           string
	killTimeout           time.Duration
	deltaRetention        time.Duration
	maxConnections        int
	idleTimeout           time.Duration
	fastPost              bool
	storage               storageFlags
	leaseHolder           string
	leaseTTL              time.Duration
	advertiseURL          string
	gcHeadroom            int64
	cpuProfile            string
	otlpEndpoint          string
	traceSample           float64
	corsOrigins           []string
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
			f.checkpointIntervalSet = cmd.Flags().Changed("checkpoint-interval")
			_, gogcSet := os.LookupEnv("GOGC")
			stopGC, err := keepGCGoal(f.gcHeadroom, cmd.Flags().Changed("gc-headroom"), gogcSet)
			if err != nil {
				return err
			}
			defer stopGC()
			if f.cpuProfile != "" {
				stopProfile, err := cli.StartCPUProfile(f.cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			return serve(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", "./annal-data", "data folder: log, state, keys, credentials")
	fl.StringVar(&f.listen, "listen", DefaultListen, "address to listen on")
	fl.StringVar(&f.origin, "origin", "", "log origin, used on first start only (default: generated)")
	fl.DurationVar(&f.checkpointInterval, "checkpoint-interval", kernel.DefaultCheckpointInterval, "how often a checkpoint is signed (min 100ms)")
	fl.UintVar(&f.batchSize, "batch-size", kernel.DefaultBatchMaxSize, "most entries written at once: a write-ahead group (one fsync), or with --no-write-ahead a Tessera batch")
	fl.DurationVar(&f.batchAge, "batch-age", kernel.DefaultBatchMaxAge, "with --no-write-ahead, Tessera batch: longest an entry waits to be written")
	fl.BoolVar(&f.noWriteAhead, "no-write-ahead", false, "answer an action only once Tessera has written it into the tiles (several fsyncs), not once the data folder's write-ahead log holds it (one fsync)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of the whole run to this file, finished when serve stops")
	fl.Int64Var(&f.gcHeadroom, "gc-headroom", gcgoal.DefaultHeadroom, "bytes the heap may grow above the live heap between garbage collections (at most 10x the live heap; GOGC, when set, wins over this default); 0: Go's default, twice the live heap")
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
	fl.DurationVar(&f.deltaRetention, "delta-retention", delta.DefaultRetention, "how long a session delta's changes are kept (sealed beside the log, then erased by the kernel; their hashes stay in the log for good); 0: the changes are logged themselves, kept for good (§14.7)")
	fl.IntVar(&f.maxConnections, "max-connections", 1024, "most client connections served at once; more wait to be accepted")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 120*time.Second, "how long an idle keep-alive connection stays open")
	fl.BoolVar(&f.fastPost, "fast-post", true, "serve plainly framed POST /v1/actions requests, and the requests agents make between them whose answers are one record (a proof, an entry, the log's state, a session's delta, a hold's answer: server.Buffered), without net/http's work for each request (internal/fastpost), on plain HTTP; false: net/http serves every request")
	fl.BoolVar(&f.keepBlobs, "keep-blobs", false, "keep the bytes behind OIDs that clients send (POST /v1/blobs) in DATA/blobs (with --storage aws: encrypted in the bucket, for every instance), served to humans at GET /v1/blobs/<oid>")
	fl.Int64Var(&f.maxBlob, "max-blob", 16<<20, "the largest blob (and agent file), in bytes")
	fl.Int64Var(&f.blobQuota, "blob-quota", 10<<30, "the most bytes all blobs and agent files may take")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate file: serve HTTPS (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	fl.BoolVar(&f.secureCookies, "secure-cookies", false, "mark the console's session cookie Secure even on plain HTTP (behind a TLS-terminating proxy); always on with --tls-cert")
	fl.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "trace every request and the kernel's stages (decide, append, fold) and export the spans by OTLP/HTTP to this base URL, e.g. http://127.0.0.1:4318 (sent to its /v1/traces); off when empty. The SDK reads OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE, OTEL_BSP_*, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES")
	fl.StringArrayVar(&f.corsOrigins, "cors-origin", nil, "answer cross-origin requests (CORS) from this origin, e.g. https://app.example.com, so that a web page there can call the API with a bearer credential (never with the console's cookie); repeat for more; none by default")
	fl.Float64Var(&f.traceSample, "trace-sample", 1, "with --otlp-endpoint: the share of new traces kept, 0 to 1; a request that continues a caller's trace (traceparent) follows the caller's sampled flag")
	f.storage.register(fl)
	fl.StringVar(&f.leaseHolder, "lease-holder", "", "with --storage aws: this kernel's name in the write lease (default: host name and a random suffix)")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 10*time.Second, "with --storage aws: how long the write lease lasts unrenewed; a standby takes over this long after the active kernel stops")
	fl.StringVar(&f.advertiseURL, "advertise-url", "", "with --storage aws: the URL the other kernels of the log reach this one at, to forward the writes they cannot decide while it holds the write lease, e.g. http://10.0.0.5:7420 (default: the address it listens on, http(s)://--listen)")
	fl.DurationVar(&f.tick, "tick", time.Duration(event.DefaultEnergy.TickMillis)*time.Millisecond, "tick length Δt, in milliseconds or more (first start only)")
	return cmd
}

// keepGCGoal applies --gc-headroom for as long as serve runs: nothing when
// it is 0, or when GOGC is set and the flag was not given (the runtime
// has applied GOGC). It returns how to stop.
func keepGCGoal(headroom int64, flagGiven, gogcSet bool) (func(), error) {
	switch {
	case headroom < 0:
		return nil, fmt.Errorf("--gc-headroom %d: 0 or more bytes", headroom)
	case headroom == 0 || (gogcSet && !flagGiven):
		return func() {}, nil
	}
	return gcgoal.Keep(uint64(headroom)), nil
}

// keepReplayGCGoal gives a command that replays the whole log (rebuild,
// audit) serve's default headroom, unless GOGC is set. Why: the replay
// allocates every entry's event and drops it at once, and at Go's default
// goal (twice a live heap of a few tens of MB) the collector ran every few
// thousand entries, some 17% of an audit's CPU. It returns how to stop.
func keepReplayGCGoal() func() {
	_, gogcSet := os.LookupEnv("GOGC")
	stop, _ := keepGCGoal(gcgoal.DefaultHeadroom, false, gogcSet) // a positive headroom: no error
	return stop
}

func serve(ctx context.Context, f serveFlags, stdout, stderr io.Writer) error {
	logger, err := newLogger(f.logLevel, stderr)
	if err != nil {
		return err
	}
	cfg, err := f.kernelConfig(logger)
	if err != nil {
		return err
	}
	if err := f.checkListen(); err != nil {
		return err
	}
	tracer, stopTracing, err := f.tracing(ctx, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	cfg.Tracer = tracer
	// The port first: a taken port must not leave a new data folder behind.
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	fr, err := newFront(f, netutil.LimitListener(ln, f.maxConnections), logger)
	if err != nil {
		return err
	}
	ctx, lostLease := context.WithCancelCause(ctx)
	defer lostLease(nil)
	if cfg.Storage.AWS != nil {
		release, err := holdLease(ctx, f, cfg, tracer, logger, stdout, fr, lostLease)
		if err != nil {
			return fr.stoppedWaiting(ctx, err)
		}
		defer release()
	}
	k, err := kernel.Open(cfg)
	if err != nil {
		return err
	}
	defer closeKernel(k, logger)
	handler, err := apiHandler(k, f, tracer, logger, fr.fast)
	if err != nil {
		return err
	}
	standby := fr.current.Swap(&handler) != nil
	fmt.Fprintf(stdout, "annald: log %s\n", k.Origin())
	fmt.Fprintf(stdout, "annald: verifier key %s\n", k.VerifierKey())
	fmt.Fprintf(stdout, "annald: storage %s\n", k.Storage())
	fmt.Fprintf(stdout, "annald: listening on %s\n", fr.url())
	fmt.Fprintf(stdout, "annald: overseer console at %s/ui/\n", fr.url())
	fmt.Fprintf(stdout, "annald: root credential in %s\n", k.RootCredentialPath())
	if !standby {
		go fr.serve()
	}
	select {
	case err := <-fr.errc:
		return err
	case <-ctx.Done():
	}
	fr.shutdown()
	if cause := context.Cause(ctx); errors.Is(cause, kernel.ErrLeaseLost) {
		return fmt.Errorf("stopped: %w", cause)
	}
	return nil
}

// newLogger returns serve's logger at --log-level, on stderr, and sends
// Tessera's klog lines to it: one log stream, structured.
func newLogger(logLevel string, stderr io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	klog.SetSlogLogger(logger.With("component", "tessera"))
	return logger, nil
}

// kernelConfig is the kernel's configuration the flags ask for.
func (f serveFlags) kernelConfig(logger *slog.Logger) (kernel.Config, error) {
	cfg := kernel.DefaultConfig(f.data)
	cfg.Origin = f.origin
	cfg.CheckpointInterval = f.checkpointInterval
	storage, err := f.storage.config()
	if err != nil {
		return kernel.Config{}, err
	}
	cfg.Storage = storage
	if storage.AWS != nil && !f.checkpointIntervalSet {
		cfg.CheckpointInterval = kernel.MinAWSCheckpointInterval
	}
	cfg.BatchMaxSize = f.batchSize
	cfg.BatchMaxAge = f.batchAge
	cfg.DisableWriteAhead = f.noWriteAhead
	cfg.Logger = logger
	cfg.StrictDenials = f.strictDenials
	cfg.DisableProduction = f.noProduction
	cfg.Energy.Genesis = f.genesisEnergy
	cfg.Energy.PerTick = f.energyPerTick
	cfg.Energy.TickMillis = uint64(f.tick / time.Millisecond)
	cfg.DisableRateLimit = f.noRateLimit
	cfg.DeltaRetention = f.deltaRetention
	if len(f.rateLimits) > 0 {
		limits, err := parseRateLimits(f.rateLimits)
		if err != nil {
			return kernel.Config{}, fmt.Errorf("--rate-limit: %w", err)
		}
		cfg.RateLimits = limits
	}
	if f.killWebhook != "" {
		cb, err := killWebhook(f.killWebhook)
		if err != nil {
			return kernel.Config{}, fmt.Errorf("--kill-webhook: %w", err)
		}
		cfg.KillCallback, cfg.KillCallbackTimeout = cb, f.killTimeout
	}
	if f.witnessPolicy != "" {
		policy, err := os.ReadFile(f.witnessPolicy)
		if err != nil {
			return kernel.Config{}, fmt.Errorf("--witness-policy: %w", err)
		}
		cfg.WitnessPolicy, cfg.WitnessTimeout = policy, f.witnessTimeout
	}
	return cfg, nil
}

// checkListen refuses the listening flags that cannot serve.
func (f serveFlags) checkListen() error {
	if f.maxConnections < 1 {
		return fmt.Errorf("--max-connections must be at least 1")
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	return nil
}

// front is the HTTP side of one serve run. Requests go to whatever serves
// now (current): a standby's answer while it waits for the write lease,
// then the kernel's API.
type front struct {
	srv             *http.Server
	ln              net.Listener
	fast            *fastpost.Listener // nil when net/http serves every request
	scheme          string
	tlsCert, tlsKey string
	current         atomic.Pointer[http.Handler]
	errc            chan error // what serve returned
}

func newFront(f serveFlags, ln net.Listener, logger *slog.Logger) (*front, error) {
	fr := &front{ln: ln, scheme: "http", tlsCert: f.tlsCert, tlsKey: f.tlsKey, errc: make(chan error, 1)}
	if f.tlsCert != "" {
		fr.scheme = "https"
	}
	fr.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*fr.current.Load()).ServeHTTP(w, r) }),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       f.idleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	// Agents' actions, the load that matters, skip net/http's work for
	// each request when their framing is plain, and so do the requests an
	// agent makes between them on the same connection whose answers are
	// one record written whole (server.Buffered: the log's state, a
	// proof, an entry, a published receipt, a session's delta, a hold's
	// answer); every other request, and every connection after one, is
	// net/http's (see internal/fastpost).
	if f.fastPost && f.tlsCert == "" {
		fast, err := fastpost.New(ln, fastpost.Config{
			Path: "/v1/actions", Handler: fr.srv.Handler, MaxBody: api.MaxActionBody, Buffered: server.Buffered,
			ReadHeaderTimeout: fr.srv.ReadHeaderTimeout, ReadTimeout: fr.srv.ReadTimeout, IdleTimeout: fr.srv.IdleTimeout,
			Server: fr.srv, Logger: logger,
		})
		if err != nil {
			return nil, err
		}
		fr.fast, fr.ln = fast, fast
	}
	return fr, nil
}

// url is where the front listens, scheme and address.
func (fr *front) url() string { return fr.scheme + "://" + fr.ln.Addr().String() }

// serve serves until the server stops, and sends on errc why.
func (fr *front) serve() {
	if fr.tlsCert != "" {
		fr.errc <- fr.srv.ServeTLS(fr.ln, fr.tlsCert, fr.tlsKey)
	} else {
		fr.errc <- fr.srv.Serve(fr.ln)
	}
}

// shutdown stops serving. A stop takes at most about 5 s in every state:
// requests in flight get httpDrain to finish (a long poll is cut), then
// the kernel gets its own bound to write what it holds.
func (fr *front) shutdown() {
	shutdownCtx, cancel := context.WithTimeout(context.Background(), httpDrain)
	defer cancel()
	if err := fr.srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fr.srv.Close()
	}
	if fr.fast != nil {
		fr.fast.Shutdown(shutdownCtx) // at its end, what is left is closed
	}
}

// stoppedWaiting is serve's answer when it stopped before it held the
// write lease: a stop (SIGTERM) while a follower is a clean one.
func (fr *front) stoppedWaiting(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	fr.shutdown()
	return nil
}

// holdLease takes the write lease of a shared log (a standby until then)
// and keeps it; losing it (another kernel took it, or it expired: an
// expired lease is never renewed) ends ctx through lostLease.
// It sets cfg's lease and returns how to release it.
func holdLease(ctx context.Context, f serveFlags, cfg kernel.Config, tracer trace.Tracer, logger *slog.Logger, stdout io.Writer, fr *front, lostLease context.CancelCauseFunc) (release func(), err error) {
	if f.advertiseURL != "" {
		if err := kernel.CheckAdvertiseURL(f.advertiseURL); err != nil {
			return nil, fmt.Errorf("--advertise-url: %w", err)
		}
	}
	// Before serving as a follower: a folder without the log's shared.key
	// could not take over.
	if err := kernel.CheckSharedKey(ctx, f.data, cfg.Storage.AWS); err != nil {
		return nil, err
	}
	lease, err := takeLease(ctx, f, cfg, tracer, logger, stdout, fr)
	if err != nil {
		return nil, err
	}
	cfg.Storage.AWS.Lease = lease
	go lease.Keep(ctx, func(err error) {
		logger.Error("lost the write lease (another kernel took it, or it expired); this one stops", "err", err)
		lostLease(err)
	})
	return func() {
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := lease.Release(rctx); err != nil {
			logger.Warn("could not release the write lease; a standby takes it when it expires", "err", err)
		}
		lease.Close()
	}, nil
}

func closeKernel(k *kernel.Kernel, logger *slog.Logger) {
	if err := k.Close(); err != nil {
		logger.Error("close kernel", "err", err)
	}
}

// apiHandler is what the kernel serves: its API and console, and at /mcp
// the kernel as an MCP server (streamable HTTP), acting with each
// request's bearer credential through the same API.
func apiHandler(k *kernel.Kernel, f serveFlags, tracer trace.Tracer, logger *slog.Logger, fast *fastpost.Listener) (http.Handler, error) {
	handler, err := newAPIServer(k, f, tracer, logger, fast)
	if err != nil {
		return nil, err
	}
	return withMCP(handler), nil
}

// newAPIServer is the kernel's API and console; its metrics count the
// front's fast path's connections, if it has one.
func newAPIServer(k *kernel.Kernel, f serveFlags, tracer trace.Tracer, logger *slog.Logger, fast *fastpost.Listener) (*server.Server, error) {
	handler := server.New(k, logger)
	if fast != nil {
		if err := handler.RegisterMetrics(fastPathMetrics(fast)...); err != nil {
			return nil, err
		}
	}
	if tracer != nil {
		handler.Trace(tracer)
	}
	if f.secureCookies {
		handler.SecureCookies()
	}
	if err := handler.AllowOrigins(f.corsOrigins...); err != nil {
		return nil, fmt.Errorf("--cors-origin: %w", err)
	}
	// The agent file system's files are always kept (an agent's memory is
	// no use unread); other blobs only with --keep-blobs. Both share one
	// store, its limits and quota.
	store, err := openBlobs(k, f)
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	if f.keepBlobs {
		handler.KeepBlobs(store)
	} else {
		handler.KeepFiles(store)
	}
	return handler, nil
}

// fastPathMetrics count the fast path's connections, and those it
// handed to net/http: an operator sees agents whose clients leave it.
func fastPathMetrics(fast *fastpost.Listener) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "annal_fastpath_connections_total",
			Help: "Connections accepted by the fast path (--fast-post).",
		}, func() float64 { return float64(fast.Stats().Accepted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "annal_fastpath_handoffs_total",
			Help: "Connections the fast path handed to net/http, at their first request it does not take; the rest of their requests are net/http's.",
		}, func() float64 { return float64(fast.Stats().HandedOff) }),
	}
}

// withMCP serves api, and at /mcp the kernel as an MCP server acting
// through api (for a follower: reads served, writes forwarded).
func withMCP(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", agentmcp.HTTPHandler(api, cli.Version()))
	mux.Handle("/", api)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Agents' actions, nearly all requests under load, go straight to
		// api, where the mux would send them too (a clean path that is not
		// /mcp): its search was 1% of annald's CPU.
		if r.URL.Path == "/v1/actions" {
			api.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// openBlobs opens the blob store: DATA/blobs, or on shared storage the
// log's shared store, where every instance serves every blob (what
// DATA/blobs holds from before is moved there first).
func openBlobs(k *kernel.Kernel, f serveFlags) (*blobstore.Store, error) {
	local := filepath.Join(f.data, "blobs")
	if shared := k.Shared(); shared != nil {
		return blobstore.OpenShared(shared, local, f.maxBlob, f.blobQuota)
	}
	return blobstore.Open(local, f.maxBlob, f.blobQuota)
}

// silenceTessera sends Tessera's klog lines nowhere: the offline commands
// print their own report.
func silenceTessera() {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
}

// offlineConfig is the kernel's configuration for an offline command on
// the data folder: nothing logged.
func offlineConfig(data string) kernel.Config {
	silenceTessera()
	cfg := kernel.DefaultConfig(data)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// httpDrain is how long a stop waits for requests in flight.
const httpDrain = 1500 * time.Millisecond

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
			defer keepReplayGCGoal()()
			cfg := offlineConfig(data)
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
		Short: "Check every entry and tile of the stored log against its signed tree",
		Long: `verify checks that the published checkpoint verifies under the log's key
(log.pub), that the tree state agrees with it, and that every entry and every
hash tile on disk hashes to the signed root: an entry or tile changed on disk
after it was logged is found, and the first damaged file is named. It changes
nothing and may run while annald serves the folder. Exit status 1 on damage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			origin, err := os.ReadFile(filepath.Join(data, "origin"))
			if err != nil {
				return fmt.Errorf("%s is not an annald data folder: %w", data, err)
			}
			start := time.Now()
			size, err := kernel.VerifyFolder(cmd.Context(), data)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "annald: the %d entries of %s and their tiles hash to its signed tree (%v)\n", size, strings.TrimSpace(string(origin)), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "./annal-data", "data folder")
	return cmd
}

func newRepairCommand() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Mend what the data folder itself can mend, and name what it cannot",
		Long: `repair removes the temporary files of interrupted writes, derives a damaged
or missing hash tile again from the entries below it (kept only if the tree
then hashes to the signed root), signs a new checkpoint of the tree state when
the published one does not verify, and rebuilds the state cache from the log.
A lost or changed entry cannot be mended from the folder: repair names the
file and stops (restore the log folder from a backup). annald must not be
running on the folder.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := offlineConfig(data)
			r, err := kernel.Repair(cmd.Context(), cfg)
			out := cmd.OutOrStdout()
			if r != nil {
				if r.TempFiles > 0 {
					fmt.Fprintf(out, "annald: removed %d temporary files of interrupted writes\n", r.TempFiles)
				}
				for _, m := range r.Mended {
					fmt.Fprintf(out, "annald: mended %s\n", m)
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "annald: the log's %d entries and tiles agree with its signed tree\n", r.Size)
			if d := r.State.Differences; len(d) > 0 {
				fmt.Fprintf(out, "annald: rebuilt the state cache, which differed from the log in %d places\n", len(d))
			} else {
				fmt.Fprintf(out, "annald: the state cache equals the log's replay\n")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "./annal-data", "data folder")
	return cmd
}
