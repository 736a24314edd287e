package kernel

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/session"
)

// BenchmarkGates measures what the validate stage costs, in process and
// without the log: the same action by root (no agent gates), by a governed
// agent (boundary, envelope, hold), and by an agent with every execution
// control gate doing work (rate limit, quarantine, session and isolation,
// ring with a descriptor, resources, policy patterns). The form check runs
// before the lock and is timed with the rest; the fold runs the same rule
// again, which BenchmarkFold measures.
func BenchmarkGates(b *testing.B) {
	g := openGov(b, func(c *Config) {
		c.DisableRateLimit = false
		c.RateLimits = map[ring.Ring]RateLimit{}
		for _, r := range []ring.Ring{0, 1, 2, 3} {
			c.RateLimits[r] = RateLimit{Rate: 1e12, Burst: 1e12}
		}
	})
	ctx := context.Background()
	gov := g.ringAgent(ptr(0.8), false, "workspace/**:mutate", "sessions/**:mutate")
	all := g.ringAgent(ptr(0.8), false, "workspace/**:mutate", "sessions/**:mutate")
	if _, err := g.SetPolicy(ctx, g.root, policy.Defaults()[1]); err != nil { // no_pii
		b.Fatal(err)
	}
	if _, err := g.AttachPolicy(ctx, g.root, PolicyAttachment{Policy: "no_pii", Agent: all.ID}); err != nil {
		b.Fatal(err)
	}
	if _, err := g.RegisterAction(ctx, g.root, ring.Descriptor{ActionID: "edit", Name: "edit", ExecuteAPI: "/edit", Reversibility: ring.Full}, grants("sessions/**:mutate")); err != nil {
		b.Fatal(err)
	}
	g.activeSession("bench", session.DefaultConfig(), all)
	payload := []byte(`{"content_oid":"sha256:00000000000000000000000000000000000000000000000000000000000000aa","bytes":1234}`)
	for _, tc := range []struct {
		name string
		who  *Actor
		req  func(i uint64) ActionRequest
	}{
		{"root", g.root, func(i uint64) ActionRequest {
			return ActionRequest{Type: event.Mutate, Target: fmt.Sprint("workspace/", i), Payload: payload}
		}},
		{"governed", gov, func(i uint64) ActionRequest {
			return ActionRequest{Type: event.Mutate, Target: fmt.Sprint("workspace/", i), Payload: payload}
		}},
		{"all-gates", all, func(i uint64) ActionRequest {
			t := fmt.Sprint("sessions/bench/", i)
			return ActionRequest{Type: event.Mutate, Target: t, Payload: payload, Session: "bench",
				Resources: &event.Resources{FilesystemWrite: []string{t}, Tools: 1}}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var n atomic.Uint64
			b.ReportAllocs()
			id, _ := newEventID()
			for b.Loop() {
				req := tc.req(n.Add(1))
				action, err := actionForm(req)
				if err != nil {
					b.Fatal(err)
				}
				now := event.At(g.clock.Now())
				g.mu.Lock() // what runs under the kernel's lock: build, claims, the action rule
				ev, err := buildAction(g.ledger, tc.who.ID, req.Session, action, nil, now)
				if err != nil {
					b.Fatal(err)
				}
				ev.V, ev.ID, ev.Time = event.Version, id, now
				if busy := g.claims.tryTake(g.ledger.Claims(ev)); busy != nil {
					b.Fatal("claims busy")
				}
				if err := g.ledger.Check(ev, g.checkOptions()); err != nil {
					b.Fatal(err)
				}
				g.claims.release(g.ledger.Claims(ev))
				g.mu.Unlock()
			}
		})
	}
}
