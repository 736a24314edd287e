package history

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	bolt "go.etcd.io/bbolt"
)

func actionBy(actor, target string, outcome string) *event.Event {
	return &event.Event{Kind: event.KindAction, Actor: actor,
		Action:   &event.Action{Type: event.Mutate, Target: target},
		Decision: &event.Decision{Outcome: outcome}}
}

// What a write puts in the state file is what the next open reads: the
// fold record, and an index key for every term of every event written.
func TestStore_WriteThenReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	c, err := OpenStateCache(path, "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	events := []*event.Event{actionBy("agent-a", "workspace/1", event.OutcomeCommitted), actionBy("agent-b", "workspace/2", event.OutcomeCommitted)}
	var index []IndexedEvent
	for i, ev := range events {
		index = append(index, IndexedEvent{Index: uint64(i + 1), Terms: IndexTerms(ev)})
	}
	leaf := [32]byte{1, 2, 3}
	folded := ledger.New()
	folded.Size = 3
	values := map[string][]byte{}
	for _, key := range folded.Keys() {
		values[key], _ = folded.Encode(key)
	}
	if err := c.Store.Write(values, index, FoldedRecord{Size: 3, Leaf: leaf}); err != nil {
		t.Fatal(err)
	}
	if err := c.Store.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := OpenStateCache(path, "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Store.Close()
	if again.Damaged != nil || again.Folded.Size != 3 || again.Folded.Leaf != leaf || again.Ledger.Size != 3 {
		t.Fatalf("reopened: damaged %v, folded %+v", again.Damaged, again.Folded)
	}
	var entries []string
	if err := again.Store.DB.View(func(tx *bolt.Tx) error {
		entries = indexEntries(t, tx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{indexEntry([]byte("aagent-a"), 1), indexEntry([]byte("aagent-b"), 2)} {
		if !slices.Contains(entries, want) {
			t.Errorf("the index lacks %q; it holds %q", want, entries)
		}
	}
}

// A state file of another log is not read as this log's state.
func TestStore_AnotherOriginIsNotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	c, err := OpenStateCache(path, "example.com/one")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Store.Write(map[string][]byte{}, nil, FoldedRecord{Size: 5}); err != nil {
		t.Fatal(err)
	}
	c.Store.Close()
	other, err := OpenStateCache(path, "example.com/two")
	if err != nil {
		return // refused outright
	}
	defer other.Store.Close()
	if other.Folded.Size != 0 || other.Ledger.Size != 0 {
		t.Fatalf("the state of example.com/one was read as example.com/two's: %+v (damaged: %v)", other.Folded, other.Damaged)
	}
}

// Every filter of a query is checked against the event itself.
func TestQuery_Matches(t *testing.T) {
	ev := actionBy("agent-a", "workspace/notes/1", event.OutcomeCommitted)
	for _, c := range []struct {
		q    Query
		want bool
	}{
		{Query{}, true},
		{Query{Actor: "agent-a"}, true},
		{Query{Actor: "agent-b"}, false},
		{Query{Kind: string(event.KindAction)}, true},
		{Query{Kind: string(event.KindHoldRequested)}, false},
		{Query{Type: string(event.Mutate)}, true},
		{Query{Type: string(event.Observe)}, false},
		{Query{TargetPrefix: "workspace/notes/"}, true},
		{Query{TargetPrefix: "workspace/other/"}, false},
		{Query{Outcome: OutcomeCommitted}, true},
		{Query{Outcome: OutcomeDenied}, false},
	} {
		if got := c.q.Matches(ev, nil); got != c.want {
			t.Errorf("%+v matches: %v, want %v", c.q, got, c.want)
		}
	}
	if (Query{}).Matches(ev, map[string]bool{"agent-b": true}) {
		t.Error("an event of an actor outside visible matches")
	}
}
