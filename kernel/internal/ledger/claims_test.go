package ledger

import (
	"slices"
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
		a.claimKey = ""
	}
	for _, v := range l.Envelopes {
		v.chainClaims = nil
	}
	if got := l.Claims(act); !slices.Equal(got, want) {
		t.Fatalf("claims without kept keys %v, want %v", got, want)
	}
}
