package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/annal-dev/annal/internal/cli"
	"github.com/annal-dev/annal/internal/fastpost"
	"github.com/annal-dev/annal/witness"
	"github.com/spf13/cobra"
)

// DefaultListen is loopback: a witness is put on the Internet on purpose,
// behind whatever the operator chooses.
const DefaultListen = "127.0.0.1:7430"

type serveFlags struct {
	data, listen, name, logLevel string
	lockTimeout                  time.Duration
	// gossipInterval is the time between gossip rounds; 0 turns gossip off.
	gossipInterval time.Duration
	mldsa          bool
	cpuProfile     string
	gcPercent      int
	commitLinger   time.Duration
	fastPost       bool
}

// DefaultGCPercent is the garbage collector's target of annal-witness
// serve (Go's GOGC; Go's own default is 100). Why: a witness's live heap
// is small (the requests in flight; the state is in bbolt's map, outside
// the heap), and each cosignature allocates its notes and signatures
// afresh, so at 100 the collector ran most of the time under load. At 400,
// interleaved runs of annal-witness-bench --logs 100 took 0.39–0.42 ms of
// CPU per cosignature instead of 0.46–0.48 (+7–19% cosignatures/s), with
// RSS 48 MB instead of 33 MB.
const DefaultGCPercent = 400

func newServeCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the witness on a data folder (created, with the witness key, on first start)",
		Long: `serve answers POST /add-checkpoint (c2sp.org/tlog-witness) and
GET /<hex SHA-256(origin)>/checkpoint, the latest checkpoint it cosigned for a
log, and GET /evidence, the equivocation evidence it found. On first start it
makes the data folder and its keys: Ed25519 (witness.key) and ML-DSA-44
(witness-mldsa.key), both mode 0600 and bearing the witness's name; every
cosignature is then two lines, one by each key (c2sp.org/tlog-cosignature).
It prints both verifier keys: a log's policy and the witness's peers name
either. --mldsa=false signs with Ed25519 only. It prints its URL too. Every
--gossip-interval it checks its peers' checkpoints against its own. While it
runs, "annal-witness logs|peers|evidence" commands reach it through the admin
socket in the data folder.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if f.commitLinger < 0 {
				return fmt.Errorf("--commit-linger %v: 0 or more", f.commitLinger)
			}
			if f.gcPercent < 1 {
				return fmt.Errorf("--gc-percent %d: at least 1", f.gcPercent)
			}
			_, gogcSet := os.LookupEnv("GOGC")
			if percent, ok := gcPercentFor(cmd.Flags().Changed("gc-percent"), f.gcPercent, gogcSet); ok {
				defer debug.SetGCPercent(debug.SetGCPercent(percent))
			}
			return serve(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", DefaultData, "data folder: state, witness key, admin socket")
	fl.StringVar(&f.listen, "listen", DefaultListen, "address to listen on")
	fl.StringVar(&f.name, "name", "", "witness key name, a schema-less URL such as witness.example.com/w1; used on first start (default: <hostname>/annal-witness)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.DurationVar(&f.lockTimeout, "lock-timeout", witness.DefaultLockTimeout, "how long to wait for another process to release the data folder")
	fl.DurationVar(&f.gossipInterval, "gossip-interval", witness.DefaultGossipInterval, "time between gossip rounds with the peers; 0 turns gossip off")
	fl.BoolVar(&f.mldsa, "mldsa", true, "cosign with an ML-DSA-44 key too (made on first start with it, in witness-mldsa.key)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (go tool pprof) of the whole run to this file, finished when serve stops")
	fl.IntVar(&f.gcPercent, "gc-percent", DefaultGCPercent, "the garbage collector's target, as GOGC (which, when set, wins over this default)")
	fl.DurationVar(&f.commitLinger, "commit-linger", witness.DefaultCommitLinger, "how long a commit group may wait for more requests, under load or while some are being checked and signed; 0 commits what is queued at once")
	fl.BoolVar(&f.fastPost, "fast-post", true, "serve plainly framed POST /add-checkpoint requests without net/http's work for each request (internal/fastpost); false: net/http serves every request")
	return cmd
}

// gcPercentFor is the collector's target serve sets, and whether it sets
// one: the flag's value when it was given, nothing when GOGC is set (the
// runtime has applied it), the flag's default otherwise.
func gcPercentFor(flagGiven bool, flag int, gogcSet bool) (int, bool) {
	if gogcSet && !flagGiven {
		return 0, false
	}
	return flag, true
}

func serve(ctx context.Context, f serveFlags, stdout, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if f.cpuProfile != "" {
		stopProfile, err := cli.StartCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	if err := os.MkdirAll(f.data, 0o700); err != nil {
		return fmt.Errorf("create data folder: %w", err)
	}
	store, err := openStore(f.data, f.lockTimeout)
	if err != nil {
		return err
	}
	defer closeStore(store, logger)
	cosigner, created, err := loadCosigner(f.data, f.name, f.mldsa)
	if err != nil {
		return err
	}
	linger := f.commitLinger
	if linger == 0 {
		linger = -1 // witness.Options: no wait
	}
	w, err := witness.New(store, cosigner, witness.Options{Logger: logger, CommitLinger: linger})
	if err != nil {
		return err
	}
	defer w.Close()

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           w.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	fast, ln, err := listenFast(f.fastPost, ln, srv, logger)
	if err != nil {
		return err
	}
	admin := &http.Server{Handler: witness.AdminHandler(store), ReadHeaderTimeout: 10 * time.Second}
	adminLn, adminPath := listenAdmin(f.data, logger)
	printBanner(stdout, created, cosigner, adminPath, f.gossipInterval, ln.Addr())

	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if adminLn != nil {
		defer os.Remove(adminPath)
		go func() { errc <- admin.Serve(adminLn) }()
	}
	// The round in progress ends before the witness and its state close
	// (deferred earlier, so run later).
	defer startGossip(ctx, w, f.gossipInterval)()
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	return shutdown(err, srv, fast, admin)
}

// listenFast puts, if on, internal/fastpost in front of srv on ln for
// add-checkpoint: a plainly framed request (one Content-Length, HTTP/1.1,
// nothing that changes the framing) is then served without net/http's
// work for each request, the header map, the context and the background
// read, a goroutine and its wake-ups; every other request and connection
// is net/http's, as before. Why: with one client, a request's own path is
// what a log waits for, and on a two-core machine net/http's part of it
// was about a tenth of the witness's CPU for each cosignature. The fast
// path's answer goes out in one write, and has no write deadline: it is a
// few KiB, which the socket takes whole.
func listenFast(on bool, ln net.Listener, srv *http.Server, logger *slog.Logger) (*fastpost.Listener, net.Listener, error) {
	if !on {
		return nil, ln, nil
	}
	fast, err := fastpost.New(ln, fastpost.Config{
		Path: "/add-checkpoint", Handler: srv.Handler, MaxBody: witness.MaxRequestSize,
		ReadHeaderTimeout: srv.ReadHeaderTimeout, ReadTimeout: srv.ReadTimeout, IdleTimeout: srv.IdleTimeout,
		Server: srv, Logger: logger,
	})
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return fast, fast, nil
}

func closeStore(store *witness.Store, logger *slog.Logger) {
	if err := store.Close(); err != nil {
		logger.Error("close witness state", "error", err)
	}
}

// listenAdmin opens the admin socket in the data folder; its path is
// "none" when it cannot. The witness works without it; only "logs"
// commands then need it stopped. A Unix socket path is limited to about
// 100 bytes.
func listenAdmin(data string, logger *slog.Logger) (net.Listener, string) {
	adminPath := filepath.Join(data, witness.AdminSocketName)
	adminLn, err := witness.ListenAdmin(adminPath)
	if err != nil {
		logger.Warn("no admin socket: logs commands will need the witness stopped", "error", err)
		return nil, "none"
	}
	return adminLn, adminPath
}

// printBanner says what serve serves: the keys it created, its name and
// verifier keys, its admin socket, its gossip, its address.
func printBanner(stdout io.Writer, created []string, cosigner *witness.Cosigner, adminPath string, gossipInterval time.Duration, addr net.Addr) {
	for _, path := range created {
		fmt.Fprintf(stdout, "annal-witness: created witness key %s\n", path)
	}
	fmt.Fprintf(stdout, "annal-witness: name %s\n", cosigner.Name())
	fmt.Fprintf(stdout, "annal-witness: verifier key %s\n", cosigner.VerifierKey())
	if k := cosigner.MLDSAVerifierKey(); k != "" {
		fmt.Fprintf(stdout, "annal-witness: ML-DSA-44 verifier key %s\n", k)
	}
	fmt.Fprintf(stdout, "annal-witness: admin socket %s\n", adminPath)
	if gossipInterval > 0 {
		fmt.Fprintf(stdout, "annal-witness: gossip every %v\n", gossipInterval)
	} else {
		fmt.Fprintln(stdout, "annal-witness: gossip off")
	}
	fmt.Fprintf(stdout, "annal-witness: listening on http://%s\n", addr)
}

// startGossip runs the witness's gossip rounds until ctx ends or the
// returned stop is called; stop returns once the round in progress ended.
func startGossip(ctx context.Context, w *witness.Witness, interval time.Duration) (stop func()) {
	gossipCtx, stopGossip := context.WithCancel(ctx)
	gossipDone := make(chan struct{})
	go func() {
		defer close(gossipDone)
		w.RunGossip(gossipCtx, interval)
	}()
	return func() {
		stopGossip()
		<-gossipDone
	}
}

// shutdown stops both servers once serve ends, err being why (nil for
// ctx's end): requests in flight finish, and their cosignatures are
// committed, before the state is closed. It returns the first error.
func shutdown(err error, srv *http.Server, fast *fastpost.Listener, admin *http.Server) error {
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutdownCtx); serr != nil && err == nil {
		err = serr
	}
	if fast != nil {
		if serr := fast.Shutdown(shutdownCtx); serr != nil && err == nil {
			err = serr
		}
	}
	if serr := admin.Shutdown(shutdownCtx); serr != nil && err == nil {
		err = serr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// openStore opens the data folder's state, with an error that says what to
// do when another witness holds it.
func openStore(data string, lockTimeout time.Duration) (*witness.Store, error) {
	store, err := witness.OpenStore(filepath.Join(data, witness.StateFileName), lockTimeout)
	if errors.Is(err, witness.ErrDataDirInUse) {
		return nil, fmt.Errorf("data folder %s is in use by another annal-witness process (%w); one folder serves one witness, or two could cosign two histories of one log", data, err)
	}
	return store, err
}

// loadCosigner reads the witness keys of the data folder, making them
// when missing (the ML-DSA-44 key only with withMLDSA; a folder of an
// earlier witness gains one on its next start). created lists the key
// files it wrote.
func loadCosigner(data, name string, withMLDSA bool) (c *witness.Cosigner, created []string, err error) {
	path := filepath.Join(data, witness.KeyFileName)
	if name == "" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			name = defaultWitnessName()
		}
	}
	skey, made, err := witness.LoadOrCreateKey(path, name)
	if err != nil {
		return nil, nil, err
	}
	if made {
		created = append(created, path)
	}
	if c, err = witness.NewCosigner(skey); err != nil || !withMLDSA {
		return c, created, err
	}
	path = filepath.Join(data, witness.MLDSAKeyFileName)
	mkey, made, err := witness.LoadOrCreateMLDSAKey(path, c.Name())
	if err != nil {
		return nil, nil, err
	}
	if made {
		created = append(created, path)
	}
	c, err = c.WithMLDSA(mkey)
	return c, created, err
}

// defaultWitnessName is "<hostname>/annal-witness", or "localhost/…" if the
// hostname cannot be part of a key name.
func defaultWitnessName() string {
	host, err := os.Hostname()
	if err != nil || host == "" || !validKeyName(host) {
		host = "localhost"
	}
	return host + "/annal-witness"
}

func validKeyName(s string) bool {
	for _, r := range s {
		if r <= ' ' || r == '+' || r == 0x7f || r > 0x7e {
			return false
		}
	}
	return true
}
