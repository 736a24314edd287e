package workload

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/fastpost"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/server"
)

// node is one kernel and its HTTP API, in this process, on a loopback
// port that stays the same across restarts: the listener and the HTTP
// server live as long as the run, and the handler behind them is swapped
// when the kernel is closed and opened again on its data folder.
type node struct {
	cfg      kernel.Config
	url      string
	srv      *http.Server
	handler  atomic.Pointer[http.Handler]
	rootCred string
	errs     *errorLog
	// panicked is told of each handler panic the HTTP server recovered.
	panicked func(msg string)

	mu     sync.Mutex
	k      *kernel.Kernel // nil while stopped
	wedged atomic.Bool    // a Close that never returned
	// refusals sums what the kernels closed so far kept out of the log
	// (kernel.SequencerRefusals).
	refusals atomic.Uint64
}

// serverLog takes the HTTP server's error lines: a handler that panicked
// (the server recovers it, and the connection is dropped) is a failure.
type serverLog struct{ n *node }

func (l serverLog) Write(p []byte) (int, error) {
	msg := string(p)
	if strings.Contains(msg, "panic serving") && l.n.panicked != nil {
		l.n.panicked(summarizePanic(msg))
	}
	return len(p), nil
}

// summarizePanic is a recovered panic's first line and the first frame of
// Annal's code under it.
func summarizePanic(msg string) string {
	lines := strings.Split(msg, "\n")
	out := strings.TrimSpace(lines[0])
	if i := strings.Index(out, "panic serving "); i >= 0 {
		// "http: panic serving 127.0.0.1:40000: runtime error: ..."
		rest := out[i+len("panic serving "):]
		if j := strings.Index(rest, ": "); j >= 0 {
			rest = rest[j+2:]
		}
		out = "a handler panicked: " + rest
	}
	for i, l := range lines {
		if strings.HasPrefix(l, "github.com/annal-dev/annal/") && i+1 < len(lines) && !strings.Contains(l, "internal/workload") {
			// "github.com/annal-dev/annal/kernel.(*Kernel).Quarantine(...)"
			// then "\t/somewhere/kernel/killswitch.go:167 +0x1f".
			fn := strings.TrimPrefix(l, "github.com/annal-dev/annal/")
			if j := strings.LastIndex(fn, "("); j > 0 {
				fn = fn[:j]
			}
			pkg := fn
			if j := strings.Index(pkg[strings.LastIndex(pkg, "/")+1:], "."); j >= 0 {
				pkg = pkg[:strings.LastIndex(pkg, "/")+1+j]
			}
			file := strings.TrimSpace(lines[i+1])
			if j := strings.LastIndex(file, " +0x"); j > 0 {
				file = file[:j]
			}
			return out + " in " + fn + " (" + pkg + "/" + filepath.Base(file) + ")"
		}
	}
	return out
}

// kernelConfig is the configuration of the workload's kernel: the defaults
// but for a larger energy model (the run must not end for lack of energy),
// a faster production tick (more energy.produced events among the rest)
// and rate limits that refuse some requests without refusing most.
func kernelConfig(dir string, logger *slog.Logger) kernel.Config {
	cfg := kernel.DefaultConfig(dir)
	cfg.Logger = logger
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.Energy = event.DefaultEnergy
	cfg.Energy.Genesis = 1 << 40
	cfg.Energy.PerTick = 1 << 20
	cfg.Energy.TickMillis = 250
	cfg.RateLimits = map[ring.Ring]kernel.RateLimit{
		ring.Root:       {Rate: 2000, Burst: 4000},
		ring.Privileged: {Rate: 400, Burst: 800},
		ring.Standard:   {Rate: 200, Burst: 400},
		ring.Sandbox:    {Rate: 20, Burst: 40},
	}
	return cfg
}

// startNode opens a new kernel on dir and serves it on 127.0.0.1.
func startNode(dir string) (*node, error) {
	errs := &errorLog{}
	n := &node{cfg: kernelConfig(dir, slog.New(errs)), errs: errs}
	if err := n.open(); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(n.k.RootCredentialPath())
	if err != nil {
		n.k.Close()
		return nil, err
	}
	n.rootCred = strings.TrimSpace(string(raw))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.k.Close()
		return nil, err
	}
	n.url = "http://" + ln.Addr().String()
	n.srv = &http.Server{Handler: http.HandlerFunc(n.serve), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(serverLog{n}, "", 0)}
	// As annald serves on plain HTTP: actions, and the requests between
	// them that server.Buffered takes, on fastpost's path; the rest, and every
	// connection after one, through net/http. A panic on the fast path
	// is logged through serverLog as net/http's are.
	fast, err := fastpost.New(ln, fastpost.Config{
		Path: "/v1/actions", Handler: n.srv.Handler, MaxBody: api.MaxActionBody, Buffered: server.Buffered,
		ReadHeaderTimeout: n.srv.ReadHeaderTimeout, Server: n.srv,
		Logger: slog.New(slog.NewTextHandler(serverLog{n}, nil)),
	})
	if err != nil {
		ln.Close()
		n.k.Close()
		return nil, err
	}
	go n.srv.Serve(fast)
	return n, nil
}

func (n *node) serve(w http.ResponseWriter, r *http.Request) {
	h := n.handler.Load()
	if h == nil {
		http.Error(w, `{"error":"workload: the kernel is stopped"}`, http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// open opens the kernel on the data folder and puts its API behind the
// listener.
func (n *node) open() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	k, err := kernel.Open(n.cfg)
	if err != nil {
		return err
	}
	n.k = k
	var h http.Handler = server.New(k, n.cfg.Logger)
	n.handler.Store(&h)
	return nil
}

// running reports whether a kernel is open (and not stuck closing).
func (n *node) running() bool {
	if n.wedged.Load() {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.k != nil
}

// stop takes the API away and closes the kernel.
func (n *node) stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handler.Store(nil)
	if n.k == nil {
		return nil
	}
	n.refusals.Add(n.k.SequencerRefusals())
	err := n.k.Close()
	n.k = nil
	return err
}

// closeTimeout bounds a kernel's Close: one that takes longer has hung (a
// lock never released), and is left behind.
const closeTimeout = 30 * time.Second

// stopWithin is stop bounded by closeTimeout. A kernel that does not close
// in time stays open: the node is then wedged, and nothing more can be
// done with its folder in this process.
func (n *node) stopWithin() error {
	if n.wedged.Load() {
		return errors.New("the kernel is stuck in an earlier close")
	}
	done := make(chan error, 1)
	go func() { done <- n.stop() }()
	select {
	case err := <-done:
		return err
	case <-time.After(closeTimeout):
		n.wedged.Store(true)
		return fmt.Errorf("the kernel did not close within %v: it is stuck (a lock held for ever?)", closeTimeout)
	}
}

// restart closes the kernel and opens it again on its folder.
func (n *node) restart() error {
	if err := n.stopWithin(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := n.open(); err != nil {
		return fmt.Errorf("open again: %w", err)
	}
	return nil
}

// close ends the run's server and kernel. Every request has been
// answered by then: what is left are idle connections.
func (n *node) close() error {
	return errors.Join(n.srv.Close(), n.stop())
}

// errorLog is the kernel's logger: it keeps the first lines of each
// distinct message at level warning and above (a refused fold, a failed
// append), errors first, which the report shows, and drops the rest.
type errorLog struct {
	mu     sync.Mutex
	errors []string
	warns  []string
	seen   map[string]bool
	count  int
}

const maxErrorLines = 12

func (e *errorLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (e *errorLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	line := b.String()
	key := line
	if len(key) > 100 {
		key = key[:100]
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count++
	if e.seen == nil {
		e.seen = map[string]bool{}
	}
	if e.seen[key] {
		return nil
	}
	e.seen[key] = true
	switch {
	case r.Level >= slog.LevelError && len(e.errors) < maxErrorLines:
		e.errors = append(e.errors, line)
	case r.Level < slog.LevelError && len(e.warns) < maxErrorLines:
		e.warns = append(e.warns, line)
	}
	return nil
}

func (e *errorLog) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e *errorLog) WithGroup(string) slog.Handler      { return e }

// snapshot returns the distinct lines kept, errors first, and how many
// lines there were in all.
func (e *errorLog) snapshot() ([]string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append(slices.Clone(e.errors), e.warns...), e.count
}
