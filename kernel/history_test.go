package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/history"
)

// historyLog is a kernel with two agents under envelopes, a session, and
// committed, denied and held actions.
func historyLog(t *testing.T, mutate ...func(*Config)) (*govKernel, *Actor, *Actor) {
	t.Helper()
	g := openGov(t, mutate...)
	a, _ := g.agent(10_000, "workspace/**:observe,mutate")
	b, _ := g.agent(10_000, "workspace/**:observe")
	g.envelope(g.root, EnvelopeRequest{Holder: a.ID, Budget: 5_000, Grants: grants("workspace/**:observe,mutate"), HoldOn: grants("workspace/release/**:mutate")})
	// Decoys: payloads that hold another target's text, which the search
	// for a target prefix may look at but must not return.
	for i := range 3 {
		if _, err := g.Submit(context.Background(), a, ActionRequest{Type: event.Observe, Target: fmt.Sprintf("workspace/a/decoy/%d", i),
			Payload: []byte(`{"note":{"target":"workspace/b/decoy"}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		g.submit(a, event.Observe, fmt.Sprintf("workspace/a/%d", i))
		g.submit(b, event.Observe, fmt.Sprintf("workspace/b/%d", i))
		if i%10 == 0 {
			g.submit(b, event.Mutate, "workspace/b/denied") // b may not mutate
			g.submit(a, event.Mutate, fmt.Sprintf("workspace/release/%d", i))
		}
	}
	return g, a, b
}

// allEvents reads the whole log: the oracle for History.
func allEvents(t *testing.T, k *Kernel) []HistoryItem {
	t.Helper()
	k.mu.Lock()
	size := k.ledger.Size
	k.mu.Unlock()
	var out []HistoryItem
	for i := range size {
		entry, err := k.Entry(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := event.Parse(entry)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, HistoryItem{Index: i, Event: ev})
	}
	return out
}

// pages reads every page of a query, following the cursor.
func pages(t *testing.T, k *Kernel, viewer *Actor, q HistoryQuery) []uint64 {
	t.Helper()
	var got []uint64
	for range 1000 {
		p, err := k.History(context.Background(), viewer, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Events {
			got = append(got, it.Index)
		}
		if p.NextCursor == nil {
			return got
		}
		q.Cursor = p.NextCursor
	}
	t.Fatal("paging did not end")
	return nil
}

func TestHistoryFiltersAgreeWithTheLog(t *testing.T) {
	// The test persists by hand: the index tail stays where each phase
	// puts it.
	g, a, b := historyLog(t, func(c *Config) { c.FoldInterval = time.Hour })
	check := func(phase string) {
		all := allEvents(t, g.Kernel)
		queries := map[string]HistoryQuery{
			"all":                                {},
			"actor a":                            {Actor: a.ID},
			"actor b":                            {Actor: b.ID},
			"kind action":                        {Kind: string(event.KindAction)},
			"type mutate":                        {Type: "mutate"},
			"denied":                             {Outcome: OutcomeDenied},
			"held":                               {Outcome: OutcomeHeld},
			"committed by a":                     {Outcome: OutcomeCommitted, Actor: a.ID},
			"target prefix":                      {TargetPrefix: "workspace/b/"},
			"target prefix, a part of a segment": {TargetPrefix: "workspace/a/de"},
			"since":                              {Since: all[len(all)/2].Event.Time},
			"until":                              {Until: all[len(all)/3].Event.Time},
		}
		for _, e := range all {
			if e.Event.Action != nil && e.Event.Action.Envelope != "" {
				queries["envelope"] = HistoryQuery{Envelope: e.Event.Action.Envelope}
				break
			}
		}
		for name, q := range queries {
			var want []uint64
			for _, e := range all {
				if q.Matches(e.Event, nil) {
					want = append(want, e.Index)
				}
			}
			if len(want) == 0 {
				t.Fatalf("%s %s: the oracle selects nothing; the test proves nothing", phase, name)
			}
			for _, limit := range []int{1, 7, 500} {
				q.Limit = limit
				q.Oldest = true
				if got := pages(t, g.Kernel, g.root, q); !slices.Equal(got, want) {
					t.Fatalf("%s %s oldest first, pages of %d: %v, want %v", phase, name, limit, got, want)
				}
				q.Oldest = false
				got := pages(t, g.Kernel, g.root, q)
				slices.Reverse(got)
				if !slices.Equal(got, want) {
					t.Fatalf("%s %s newest first, pages of %d: %v, want %v", phase, name, limit, got, want)
				}
			}
		}
	}
	check("unpersisted") // the index tail in memory
	if err := g.persist(); err != nil {
		t.Fatal(err)
	}
	check("persisted")
	g.submit(a, event.Observe, "workspace/a/late") // half in bbolt, half in memory
	check("mixed")
	// Persist writes the index before it drops the tail: in between, the
	// same events are in both, and none may be yielded twice.
	for i := range 3 {
		g.submit(a, event.Observe, fmt.Sprintf("workspace/a/later/%d", i))
		g.submit(b, event.Observe, fmt.Sprintf("workspace/b/later/%d", i))
	}
	g.mu.Lock()
	tail := slices.Clone(g.unindexed)
	g.mu.Unlock()
	if len(tail) == 0 {
		t.Fatal("no tail to write ahead")
	}
	if err := g.store.Write(nil, tail, history.FoldedRecord{}); err != nil {
		t.Fatal(err)
	}
	check("index ahead of the tail")
}

func TestHistorySurvivesARestart(t *testing.T) {
	g, a, _ := historyLog(t)
	dir := g.dir.Path
	before, err := g.History(context.Background(), g.root, HistoryQuery{Actor: a.ID, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	k := openTest(t, dir)
	defer k.Close()
	after, err := k.History(context.Background(), rootOf(t, k), HistoryQuery{Actor: a.ID, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Events) != len(before.Events) || len(before.Events) < 30 {
		t.Fatalf("after a restart %d events, before %d", len(after.Events), len(before.Events))
	}
}

// An agent reads its own history and its children's, nobody else's.
func TestHistoryVisibility(t *testing.T) {
	g, a, b := historyLog(t)
	own, err := g.History(context.Background(), a, HistoryQuery{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(own.Events) == 0 {
		t.Fatal("an agent sees none of its own events")
	}
	for _, e := range own.Events {
		if e.Event.Actor != a.ID {
			t.Fatalf("agent %s saw event %d of %s", a.ID, e.Index, e.Event.Actor)
		}
	}
	if _, err := g.History(context.Background(), a, HistoryQuery{Actor: b.ID}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("an agent reading another's history: %v", err)
	}
	if _, err := g.History(context.Background(), a, HistoryQuery{Actor: "x\x00y"}); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("a NUL in a filter: %v", err)
	}
}

// TestAttack_HistoryScopeIsOneRule: a filter naming what the viewer does
// not oversee (another's actor or envelope, an unknown envelope or session)
// is refused, and CheckHistory — what a stream asks before it starts —
// answers every query exactly as History does.
func TestAttack_HistoryScopeIsOneRule(t *testing.T) {
	g, a, b := historyLog(t)
	ctx := context.Background()
	envA := g.Envelopes(a)[0].ID
	queries := map[string]HistoryQuery{
		"all": {}, "actor a": {Actor: a.ID}, "actor b": {Actor: b.ID}, "actor root": {Actor: RootID},
		"envelope of a": {Envelope: envA}, "no such envelope": {Envelope: "env-00112233aabbccdd"},
		"no such session": {Session: "nowhere"}, "NUL": {Kind: "a\x00"},
	}
	refused := map[string]map[string]bool{
		a.ID:   {"actor b": true, "actor root": true, "no such envelope": true, "no such session": true, "NUL": true},
		b.ID:   {"actor a": true, "actor root": true, "envelope of a": true, "no such envelope": true, "no such session": true, "NUL": true},
		RootID: {"NUL": true},
	}
	for _, viewer := range []*Actor{a, b, g.root} {
		for name, q := range queries {
			_, err := g.History(ctx, viewer, q)
			if refused[viewer.ID][name] != (err != nil) {
				t.Errorf("%s asking %s: %v", viewer.ID, name, err)
			}
			if check := g.CheckHistory(viewer, q); fmt.Sprint(check) != fmt.Sprint(err) {
				t.Errorf("%s asking %s: CheckHistory says %v, History %v", viewer.ID, name, check, err)
			}
		}
	}
}

// BenchmarkHistory: the first page of one agent's events on a log of
// 20,000 events by 16 agents (annal-bench measures a 1,000,000-event log),
// against the newest page of everything as the baseline.
func BenchmarkHistory(b *testing.B) {
	g := openGov(b)
	var agents []*Actor
	for range 16 {
		a, _ := g.agent(1<<30, "workspace/**:observe")
		agents = append(agents, a)
	}
	ctx := context.Background()
	for i := range 20_000 {
		if _, err := g.Submit(ctx, agents[i%len(agents)], ActionRequest{Type: event.Observe, Target: fmt.Sprintf("workspace/%d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	if err := g.persist(); err != nil {
		b.Fatal(err)
	}
	for name, q := range map[string]HistoryQuery{
		"all-newest":   {},
		"one-agent":    {Actor: agents[3].ID},
		"agent+prefix": {Actor: agents[3].ID, TargetPrefix: "workspace/1"},
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				p, err := g.History(ctx, g.root, q)
				if err != nil || len(p.Events) != 50 {
					b.Fatalf("%d events, %v", len(p.Events), err)
				}
			}
		})
	}
}

// TestHistoryPageEndsAtTheSizeItReads: a page reads the log as of the
// size the ledger had folded when it began; events folded and persisted
// after that (the index and the tail then name them) are not the page's,
// and oldest first the page ends before them rather than failing on an
// entry past its size.
func TestHistoryPageEndsAtTheSizeItReads(t *testing.T) {
	g, a, _ := historyLog(t)
	if err := g.persist(); err != nil {
		t.Fatal(err)
	}
	var mine []uint64
	for _, e := range allEvents(t, g.Kernel) {
		if e.Event.Actor == a.ID {
			mine = append(mine, e.Index)
		}
	}
	if len(mine) < 4 {
		t.Fatalf("agent a has %d events; the test proves little", len(mine))
	}
	size := mine[len(mine)/2] // the index and the tail name events at and past it
	for _, oldest := range []bool{true, false} {
		p, err := history.Find(context.Background(), g.store, g.log, HistoryQuery{Actor: a.ID, Oldest: oldest, Limit: 500}, nil, size, func() []history.IndexedEvent {
			g.mu.Lock()
			defer g.mu.Unlock()
			return slices.Clone(g.unindexed)
		})
		if err != nil {
			t.Fatalf("oldest %v: %v", oldest, err)
		}
		var got []uint64
		for _, it := range p.Events {
			got = append(got, it.Index)
		}
		want := slices.Clone(mine[:len(mine)/2])
		if !oldest {
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) || p.NextCursor != nil {
			t.Errorf("oldest %v, size %d: page %v (next %v), want %v", oldest, size, got, p.NextCursor, want)
		}
	}
}
