package kernel

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ratelimit"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/session"
)

// BenchmarkGates measures what the validate stage costs, in process and
// without the log: the same action by root (no agent gates), by a governed
// agent (boundary, envelope, hold), and by an agent with every execution
// control gate doing work (rate limit, quarantine, session and isolation,
// ring with a descriptor, resources, policy patterns). The form check runs
// before the lock and is timed with the rest.
func BenchmarkGates(b *testing.B) {
	g := openGov(b, func(c *Config) {
		c.DisableRateLimit = false
		c.RateLimits = map[ring.Ring]ratelimit.Limit{}
		for _, r := range []ring.Ring{0, 1, 2, 3} {
			c.RateLimits[r] = ratelimit.Limit{Rate: 1e12, Burst: 1e12}
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
			for b.Loop() {
				s := &submission{k: g.Kernel, actor: tc.who, req: tc.req(n.Add(1)), now: g.clock.Now()}
				if err := s.form(); err != nil {
					b.Fatal(err)
				}
				g.mu.Lock()
				for _, st := range pipeline[:5] { // validate … settle: what runs under the kernel's lock
					if err := st.run(s, ctx); err != nil {
						b.Fatal(err)
					}
				}
				if s.reservation != nil {
					g.flight.release(*s.reservation)
				}
				g.mu.Unlock()
			}
		})
	}
}
