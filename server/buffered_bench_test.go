package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/fastpost"
)

// BenchmarkChangesBetweenActions measures agents that change their
// session after each action (an intent lock on a path, then its release,
// in turns), through the Go client on one kept connection each, behind
// annald's fast path. An op is one action and one change (a logged
// entry each). "buffered" serves both
// on the path (Buffered, as annald does); "reads-only" takes only what
// the path took before the route table said which changes are answered
// whole (the actions' route and GETs), so each agent's first change hands
// its connection, and every action after it, to net/http.
//
// Run each mode in a process of its own, in turns: in one process the
// mode that runs first pays for the kernel's warm-up.
//
//	go test -c -o server.test ./server
//	./server.test -test.run '^$' -test.bench 'ChangesBetweenActions/buffered$' -test.benchtime 4000x -test.cpu 2
//	./server.test -test.run '^$' -test.bench 'ChangesBetweenActions/reads-only$' -test.benchtime 4000x -test.cpu 2
func BenchmarkChangesBetweenActions(b *testing.B) {
	ts := newTestServer(b, benchKernel)
	readsOnly := func(method string, u *url.URL) (int64, bool) {
		if method == http.MethodPost && u.Path != "/v1/actions" {
			return 0, false
		}
		return Buffered(method, u)
	}
	for _, mode := range []struct {
		name     string
		buffered func(string, *url.URL) (int64, bool)
	}{{"buffered", Buffered}, {"reads-only", readsOnly}} {
		base, handed := bufferedFront(b, ts.srv.Config.Handler, mode.buffered)
		agents := agentsInSessions(b, ts, base, 64, mode.name)
		locked := make([]bool, len(agents)) // by agent: whether it holds its lock
		var seq atomic.Uint64
		b.Run(mode.name, func(b *testing.B) {
			var next atomic.Uint64
			handed0 := handed.Load()
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((len(agents) + procs - 1) / procs)
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := int(next.Add(1) - 1)
				if w >= len(agents) {
					return
				}
				ctx := context.Background()
				for pb.Next() {
					i := seq.Add(1)
					if _, err := agents[w].Submit(ctx, api.ActionRequest{Type: "mutate", Target: fmt.Sprintf("workspace/d/%d/%d", w, i),
						Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
						b.Error(err)
						return
					}
					change := api.SessionChangeRequest{Op: "lock", Path: "src/main.go"}
					if locked[w] {
						change.Op = "unlock"
					}
					if _, err := agents[w].ChangeSession(ctx, sessionOf(mode.name, w), change); err != nil {
						b.Error(err)
						return
					}
					locked[w] = !locked[w]
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			cpu := processCPU() - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(handed.Load()-handed0), "handoffs")
		})
	}
}

func sessionOf(mode string, w int) string { return fmt.Sprintf("%s-%d", mode, w) }

// agentsInSessions makes n agents, each with a client of its own to base
// and envelope, and an active session of its own that it takes part in.
func agentsInSessions(b *testing.B, ts *testServer, base string, n int, mode string) []*client.Client {
	ctx := context.Background()
	grants := []api.Grant{{Pattern: "workspace/**", Actions: []string{"create", "mutate"}}}
	trust := 0.8
	out := make([]*client.Client, n)
	for i := range out {
		a, err := ts.root.CreateAgent(ctx, api.AgentRequest{Name: fmt.Sprintf("%s-%d", mode, i), Purpose: "benchmark", Energy: 1 << 40, Grants: grants, Trust: &trust})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ts.root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: a.ID, Budget: 1 << 40, Grants: grants}); err != nil {
			b.Fatal(err)
		}
		if out[i], err = client.New(base, a.Credential); err != nil {
			b.Fatal(err)
		}
		session := sessionOf(mode, i)
		if _, err := out[i].CreateSession(ctx, api.SessionRequest{ID: session, Config: json.RawMessage(`{"isolation":"SERIALIZABLE"}`)}); err != nil {
			b.Fatal(err)
		}
		for _, change := range []api.SessionChangeRequest{{Op: "state", State: "HANDSHAKING"}, {Op: "join"}, {Op: "state", State: "ACTIVE"}} {
			if _, err := out[i].ChangeSession(ctx, session, change); err != nil {
				b.Fatal(err)
			}
		}
	}
	return out
}

// bufferedFront serves handler behind the fast path with buffered, as
// annald serve does, and counts the connections net/http was handed. It
// returns its base URL.
func bufferedFront(tb testing.TB, handler http.Handler, buffered func(string, *url.URL) (int64, bool)) (string, *atomic.Int64) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	fl, err := fastpost.New(inner, fastpost.Config{Path: "/v1/actions", Handler: handler, MaxBody: api.MaxActionBody, Buffered: buffered})
	if err != nil {
		tb.Fatal(err)
	}
	var handed atomic.Int64
	hs := &http.Server{Handler: handler, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			handed.Add(1)
		}
	}}
	go hs.Serve(fl)
	tb.Cleanup(func() { hs.Close(); fl.Close() })
	return "http://" + inner.Addr().String(), &handed
}
