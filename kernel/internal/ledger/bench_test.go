package ledger

import (
	"fmt"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// BenchmarkFold measures the fold of governed actions — the action rule's
// gates and apply — as replay, restart and audit run it: 64 agents, each
// with its envelope, acting in turn.
// BenchmarkFold folds governed actions, with their rule (Fold), and as
// the kernel's durable fold does once the sequencer checked them
// (FoldChecked).
func BenchmarkFold(b *testing.B) {
	b.Run("checked", func(b *testing.B) {
		benchmarkFold(b, func(l *Ledger, e *event.Event) error { return l.Fold(l.Size, e) })
	})
	b.Run("vouched", func(b *testing.B) {
		benchmarkFold(b, func(l *Ledger, e *event.Event) error { return l.FoldChecked(l.Size, e, false) })
	})
}

func benchmarkFold(b *testing.B, fold func(*Ledger, *event.Event) error) {
	bld := &builder{t: &testing.T{}, clock: newBuilder(nil).clock}
	prefix := []*event.Event{bld.genesis(1 << 50)}
	const agents = 64
	for i := range agents {
		id := fmt.Sprintf("agent-%d", i)
		prefix = append(prefix, bld.agent(RootID, id, 1<<40), bld.trust(RootID, id), bld.envelope(RootID, fmt.Sprintf("env-%d", i), id, "", 1<<40))
	}
	actions := make([]*event.Event, 4096)
	for i := range actions {
		actions[i] = bld.act(fmt.Sprintf("agent-%d", i%agents), fmt.Sprintf("env-%d", i%agents),
			event.Action{Type: event.Mutate, Target: fmt.Sprintf("workspace/%d", i), Payload: []byte(`{"content_oid":"sha256:00000000000000000000000000000000000000000000000000000000000000aa"}`)}, 15)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		if n%len(actions) == 0 {
			b.StopTimer()
			l := New()
			for _, e := range prefix {
				if err := l.Fold(l.Size, e); err != nil {
					b.Fatal(err)
				}
			}
			bl = l
			b.StartTimer()
		}
		if err := fold(bl, actions[n%len(actions)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

var bl *Ledger
