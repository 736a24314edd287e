package ledger

import (
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// tolerated is a log.tolerated by actor naming entry index.
func (b *builder) tolerated(actor string, index uint64, leaf, gate string) *event.Event {
	return b.ev(actor, event.KindTolerated, func(e *event.Event) {
		e.Toleration = &event.Toleration{Entries: []event.ToleratedEntry{{Index: index, LeafHash: leaf, Gate: gate, Reason: "r"}}, Reason: "accepted"}
	})
}

const leafA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// An entry that breaks a rule is passed over only as Tolerate is told, and
// then changes nothing but the size; the log.tolerated that follows must
// be root's and name it as it was passed over, once. Nothing else can be
// tolerated.
func TestToleratedEntriesAreNamedByRoot(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, append(governed(b), b.status(RootID, "agent-a", event.StatusFrozen))...)
	again := b.status(RootID, "agent-a", event.StatusFrozen) // "already frozen"
	at := l.Size
	before := snapshot(t, l)
	v, err := l.Tolerate(at, again, leafA)
	if err != nil || v.Gate != GateAuthority {
		t.Fatalf("tolerate a second freeze: %v %v", v, err)
	}
	changed := l.Clone()
	changed.Size, changed.Tolerated = at, map[string]*Tolerated{}
	if l.Size != at+1 || snapshot(t, changed) != before {
		t.Fatalf("tolerating changed more than the size and the tolerated record:\nbefore %s\nafter  %s", before, snapshot(t, changed))
	}
	if l.Actors["agent-a"].Status != event.StatusFrozen || len(l.AwaitingRecord()) != 1 {
		t.Fatalf("after tolerating: %+v awaiting %v", l.Actors["agent-a"], l.AwaitingRecord())
	}
	if _, err := l.Tolerate(l.Size, b.status(RootID, "agent-a", event.StatusActive), leafA); err == nil || !strings.Contains(err.Error(), "breaks no rule") {
		t.Fatalf("tolerate an entry that folds: %v", err)
	}

	mustRefuse(t, l, b.tolerated("agent-a", at, leafA, GateAuthority), GateActor, "frozen")
	foldOn(t, l, b.agent(RootID, "human-b", 0))
	mustRefuse(t, l, b.tolerated(RootID, at-1, leafA, GateAuthority), GateAuthority, "was not passed over")
	mustRefuse(t, l, b.tolerated(RootID, at, strings.Repeat("b", 64), GateAuthority), GateAuthority, "leaf hash")
	mustRefuse(t, l, b.tolerated(RootID, at, leafA, GateEnergy), GateAuthority, "breaks the authority rule")
	record := l.Size
	foldOn(t, l, b.tolerated(RootID, at, leafA, GateAuthority))
	if got := l.Tolerated[toleratedKey(at)]; got.Record != record || got.Why != "accepted" || len(l.AwaitingRecord()) != 0 {
		t.Fatalf("tolerated record %+v", got)
	}
	mustRefuse(t, l, b.tolerated(RootID, at, leafA, GateAuthority), GateAuthority, "tolerated at entry")

	// The tolerated record survives a store and load.
	c := l.Clone()
	if snapshot(t, c) != snapshot(t, l) {
		t.Fatal("a clone differs")
	}
}
