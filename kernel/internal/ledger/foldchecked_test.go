package ledger

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// A fold vouched for as checked (FoldChecked) changes the ledger exactly
// as Fold does, tolerated violations counted alike.
func TestFoldChecked_ChangesWhatFoldChanges(t *testing.T) {
	b := newBuilder(t)
	events := []*event.Event{
		b.genesis(1_000_000), b.agent(RootID, "agent-a", 10_000), b.trust(RootID, "agent-a"),
		b.envelope(RootID, "env-e", "agent-a", "", 5_000),
		b.action("agent-a", "env-e", "workspace/x", 15), b.action("agent-a", "env-e", "workspace/y", 15),
	}
	folded, vouched := New(), New()
	vouched.CheckClaims()
	for i, e := range events {
		tolerated, err := folded.FoldReport(uint64(i), e)
		if err != nil {
			t.Fatalf("fold %d: %v", i, err)
		}
		if err := vouched.FoldChecked(uint64(i), e, len(tolerated) > 0); err != nil {
			t.Fatalf("fold %d as checked: %v", i, err)
		}
	}
	if folded.Size != vouched.Size || folded.Legacy != vouched.Legacy {
		t.Fatalf("size %d/%d, legacy %d/%d", folded.Size, vouched.Size, folded.Legacy, vouched.Legacy)
	}
	for _, k := range folded.Keys() {
		want, _ := folded.Encode(k)
		got, ok := vouched.Encode(k)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("%s: folded as checked %s, folded %s", k, got, want)
		}
	}
}

// What a caller vouches for is not taken on trust where it is cheap to be
// wrong: at another index than the ledger's size FoldChecked refuses as
// Fold does, and in a test binary an entry the rule refuses panics rather
// than being applied.
func TestFoldChecked_RefusesWhatFoldRefuses(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, b.genesis(1_000_000), b.agent(RootID, "agent-a", 10_000), b.trust(RootID, "agent-a"), b.envelope(RootID, "env-e", "agent-a", "", 20),
		b.action("agent-a", "env-e", "workspace/x", 15))
	ok := b.action("agent-a", "env-e", "workspace/y", 15)
	var fe *FoldError
	if err := l.FoldChecked(l.Size+1, ok, false); !errors.As(err, &fe) {
		t.Fatalf("fold as checked at the wrong index: %v, want a FoldError", err)
	}
	overdraw := ok // 15 more of the envelope's 20, of which 15 are spent
	before, _ := l.Encode("envelope/env-e")
	func() {
		defer func() {
			p := recover()
			if p == nil || !strings.Contains(p.(string), "the ledgers differ") {
				t.Fatalf("an entry the rule refuses, vouched for as checked: panic %v", p)
			}
		}()
		l.FoldChecked(l.Size, overdraw, false)
	}()
	if after, _ := l.Encode("envelope/env-e"); !bytes.Equal(before, after) {
		t.Fatalf("the refused entry changed its envelope: %s, was %s", after, before)
	}
}
