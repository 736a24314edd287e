package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/cmd/annal-bench/loadconn"
	"github.com/annal-dev/annal/internal/fastpost"
	"github.com/annal-dev/annal/internal/gcgoal"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/ring"
)

// BenchmarkGovernedActions measures governed actions over loopback HTTP as
// annal-bench's governed phase sends them: many agents at once, each its
// own agent, envelope and connection, the client and the server in this
// process. ns/op and allocs/op are per action for both sides together,
// which is what two cores shared by the load and the kernel pay.
//
// ANNAL_BENCH_AGENTS sets how many agents (128 by default; annal-bench
// runs 512). "kernel" sends through the Go client (client/),
// "kernel-loadconn" through cmd/annal-bench/loadconn as annal-bench's throughput
// phases do, "root-loadconn" the same as root (no agent gates), and
// "http-floor" through the Go client to a handler that only
// decodes and answers.
//
// The collector keeps annald serve's default headroom (internal/gcgoal)
// unless GOGC is set.
//
// "kernel-fastpost" is kernel-loadconn to the same handler behind
// annald's fast path for actions (internal/fastpost), as annald serve
// runs it.
//
//	go test ./server -run '^$' -bench GovernedActions -benchtime 20000x -cpu 2
func BenchmarkGovernedActions(b *testing.B) {
	if _, set := os.LookupEnv("GOGC"); !set {
		defer gcgoal.Keep(gcgoal.DefaultHeadroom)()
	}
	ts := newTestServer(b, benchKernel)
	ctx := context.Background()
	agents := 128
	if n, err := strconv.Atoi(os.Getenv("ANNAL_BENCH_AGENTS")); err == nil {
		agents = n
	}
	// dial opens a kept connection posting actions with credential.
	dial := func(credential string) *loadconn.Conn { return dialActions(b, ts.srv.URL, credential) }
	// fast: the same server behind annald's own path for POST /v1/actions
	// (internal/fastpost), as annald serve runs it.
	fast := fastFront(b, ts.srv.Config.Handler)
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}}
	trust := 0.8
	clients := make([]*client.Client, agents)
	conns := make([]*loadconn.Conn, agents)
	fastConns := make([]*loadconn.Conn, agents)
	for i := range clients {
		a, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: fmt.Sprintf("bench-%d", i), Purpose: "benchmark", Energy: 1 << 40, Grants: grants, Trust: &trust})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ts.root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 1 << 40, Grants: grants}); err != nil {
			b.Fatal(err)
		}
		if clients[i], err = client.New(ts.srv.URL, a.Credential); err != nil {
			b.Fatal(err)
		}
		conns[i] = dial(a.Credential)
		fastConns[i] = dialActions(b, fast, a.Credential)
	}
	b.Run("kernel", func(b *testing.B) {
		submitInParallel(b, len(clients), func(ctx context.Context, w int, req api.ActionRequest) error {
			_, err := clients[w].Submit(ctx, req)
			return err
		})
	})
	postReceipts := func(conns []*loadconn.Conn) func(ctx context.Context, w int, req api.ActionRequest) error {
		return func(ctx context.Context, w int, req api.ActionRequest) error {
			body, err := json.Marshal(req)
			if err != nil {
				return err
			}
			code, answer, err := conns[w].Post(ctx, body)
			var r api.Receipt
			switch {
			case err != nil:
				return err
			case code != http.StatusOK:
				return fmt.Errorf("%d %s", code, answer)
			case json.Unmarshal(answer, &r) != nil || r.Status != kernel.StatusCommitted:
				return fmt.Errorf("not a committed receipt: %s", answer)
			}
			return nil
		}
	}
	b.Run("kernel-loadconn", func(b *testing.B) {
		submitInParallel(b, len(conns), postReceipts(conns))
	})
	b.Run("kernel-fastpost", func(b *testing.B) {
		submitInParallel(b, len(fastConns), postReceipts(fastConns))
	})
	// root: the same load through the same connections' kind, every one
	// root's, whose actions no agent gate judges: what governing costs is
	// the difference.
	rootConns := make([]*loadconn.Conn, agents)
	for i := range rootConns {
		rootConns[i] = dial(ts.rootCred)
	}
	b.Run("root-loadconn", func(b *testing.B) {
		submitInParallel(b, len(rootConns), postReceipts(rootConns))
	})
	// floor: the same requests and answers through the same client and
	// HTTP server, to a handler that only decodes the request as
	// handleSubmit does and answers a receipt: what HTTP and JSON cost
	// without the kernel.
	floor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.ActionRequest
		if err := readJSON(w, r, api.MaxActionBody, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, api.Receipt{Status: "committed", EventID: "0196f7e2-0000-7000-8000-000000000000", Index: 1,
			LeafHash: strings.Repeat("ab", 32), Time: "2026-11-26T00:00:00.000000Z", Actor: "agent", Type: req.Type, Target: req.Target, Cost: 1})
	}))
	defer floor.Close()
	floorClients := make([]*client.Client, agents)
	for i := range floorClients {
		floorClients[i], _ = client.New(floor.URL, "cred")
	}
	b.Run("http-floor", func(b *testing.B) {
		submitInParallel(b, len(floorClients), func(ctx context.Context, w int, req api.ActionRequest) error {
			_, err := floorClients[w].Submit(ctx, req)
			return err
		})
	})
}

// submitInParallel has each of n clients submit in turn, client w with
// submit(ctx, w, req).
func submitInParallel(b *testing.B, n int, submit func(ctx context.Context, w int, req api.ActionRequest) error) {
	ctx := context.Background()
	var next, seq atomic.Uint64
	// One goroutine per agent whatever -cpu is: RunParallel starts
	// parallelism × GOMAXPROCS of them, and those beyond n stop at once
	// (the others take their share of b.N), since two goroutines on one
	// agent would share its connection.
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((n + procs - 1) / procs)
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(next.Add(1) - 1)
		if w >= n {
			return
		}
		for pb.Next() {
			i := seq.Add(1)
			payload := json.RawMessage(fmt.Sprintf(`{"content_oid":"sha256:%064x","bytes":%d}`, i, i))
			if err := submit(ctx, w, api.ActionRequest{Type: "mutate", Target: fmt.Sprintf("workspace/gov/%d/%d", w, i), Payload: payload}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "actions/s")
	// The process's CPU time (user and system) per action, and the cores
	// it kept busy: below the machine's cores, the kernel waits on
	// something other than the processor.
	cpu := processCPU() - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(cpu.Seconds()/b.Elapsed().Seconds(), "cores")
}

// benchKernel configures a kernel for load: no rate limit binds, and root
// holds the energy to fund the agents of every run.
func benchKernel(c *kernel.Config) {
	unlimited := kernel.RateLimit{Rate: 1e9, Burst: 1e9}
	c.RateLimits = map[ring.Ring]kernel.RateLimit{ring.Root: unlimited, ring.Privileged: unlimited, ring.Standard: unlimited, ring.Sandbox: unlimited}
	c.Energy.Genesis = 1 << 50
}

func processCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// dialActions opens a kept connection posting actions with credential to
// the server at base.
func dialActions(b *testing.B, base, credential string) *loadconn.Conn {
	h := http.Header{"Authorization": {"Bearer " + credential}, "Content-Type": {"application/json"}}
	c, err := loadconn.New(base+"/v1/actions", h, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// fastFront serves handler as annald serve does: POST /v1/actions on the
// fast path, every other request through net/http. It returns its base
// URL.
func fastFront(b *testing.B, handler http.Handler) string {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	fl, err := fastpost.New(inner, fastpost.Config{Path: "/v1/actions", Handler: handler, MaxBody: api.MaxActionBody})
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: handler}
	go hs.Serve(fl)
	b.Cleanup(func() { hs.Close() })
	return "http://" + inner.Addr().String()
}
