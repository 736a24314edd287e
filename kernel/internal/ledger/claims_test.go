package ledger

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// An action claims its actor, the rules and its envelope's chain with the
// agents that hold it, read; the keys the ledger keeps for its actors and
// envelopes give the same claims as keys made afresh, in a folded ledger
// and in one loaded from its stored state.
func TestClaimsOfAnActionUnderADelegatedEnvelope(t *testing.T) {
	b := newBuilder(t)
	l := fold(t, append(governed(b), b.agent(RootID, "agent-c", 100), b.trust(RootID, "agent-c"),
		b.envelope("agent-a", "env-c", "agent-c", "env-a", 100))...)
	act := b.action("agent-c", "env-c", "workspace/x", 15)
	want := []Claim{{Key: "actor/agent-a"}, {Key: "actor/agent-c"}, {Key: "envelope/env-a"}, {Key: "envelope/env-c"}, {Key: ClaimRules}}
	if got := l.Claims(act); !slices.Equal(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
	if got := l.Clone().Claims(act); !slices.Equal(got, want) {
		t.Fatalf("claims on the loaded ledger %v, want %v", got, want)
	}
	for _, a := range l.Actors {
		a.key = ""
	}
	for _, v := range l.Envelopes {
		v.chainClaims = nil
	}
	if got := l.Claims(act); !slices.Equal(got, want) {
		t.Fatalf("claims without kept keys %v, want %v", got, want)
	}
}

// sortClaims orders claims by key, exclusive first, each key once: as
// sorting them with the comparison and compacting them does.
func TestSortClaimsSortsAndKeepsEachKeyOnceExclusiveFirst(t *testing.T) {
	keys := []string{"actor/a", "actor/b", "envelope/e", "envelope/f", "hold/h", "rules", "session/s", "session/t"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var cs []Claim
		for range rng.IntN(40) {
			cs = append(cs, Claim{Key: keys[rng.IntN(len(keys))], Exclusive: rng.IntN(3) == 0})
		}
		want := slices.Clone(cs)
		slices.SortFunc(want, func(a, b Claim) int {
			if d := strings.Compare(a.Key, b.Key); d != 0 {
				return d
			}
			return cmp.Compare(b2i(b.Exclusive), b2i(a.Exclusive))
		})
		want = slices.CompactFunc(want, func(a, b Claim) bool { return a.Key == b.Key })
		if got := sortClaims(slices.Clone(cs)); !slices.Equal(got, want) {
			t.Fatalf("sortClaims(%v) = %v, want %v", cs, got, want)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
