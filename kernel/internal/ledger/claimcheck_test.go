package ledger

import (
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// The claims check runs in this test binary, and finds a change its event
// did not claim: here, the share a creation takes from its creator with
// the creator's claim removed (the bug that let two creations give one
// share), and another actor changed behind the event's back.
func TestClaimsCheck_FindsAnUnclaimedChange(t *testing.T) {
	if !ClaimsChecked() {
		t.Fatal("the claims check is off in a test binary")
	}
	b := newBuilder(t)
	l := fold(t, append(governed(b), b.actor(RootID, "human-h", event.Human, 0, func(r *event.ActorRecord) { r.Share = 2 }))...)
	create := b.actor("human-h", "agent-x", event.Agent, 0, func(r *event.ActorRecord) { r.Share = 1 })
	cc := l.beginClaimCheck(l.Size, create)
	if cc == nil {
		t.Fatal("no check for a creation")
	}
	if err := l.Check(create, Options{}); err != nil {
		t.Fatal(err)
	}
	clone := l.Clone()
	clone.Actors["human-h"].Share--
	clone.Actors["agent-x"] = &Actor{ActorRecord: *create.Subject, Status: event.StatusActive}
	after := clone.encodeKeys(clone.Keys())
	if err := cc.verify(after, l.Size, create); err != nil {
		t.Fatalf("the creation's own changes: %v", err)
	}
	cc.claims = l.Claims(b.actor("human-h", "agent-x", event.Agent, 0, nil)) // as before the fix: no share, no claim on the creator
	if err := cc.verify(after, l.Size, create); err == nil || !strings.Contains(err.Error(), "actor/human-h (share) is not claimed exclusively") {
		t.Fatalf("the share taken without the creator's claim: %v", err)
	}
	cc = l.beginClaimCheck(l.Size, create)
	clone.Actors["agent-a"].Stopped = true
	if err := cc.verify(clone.encodeKeys(clone.Keys()), l.Size, create); err == nil || !strings.Contains(err.Error(), "actor/agent-a (stopped)") {
		t.Fatalf("another actor changed: %v", err)
	}
	clone.Actors["agent-a"].Stopped = false
	clone.Actors["agent-a"].Balance -= 5
	if err := cc.verify(clone.encodeKeys(clone.Keys()), l.Size, create); err == nil || !strings.Contains(err.Error(), "spendable energy fell by 5") {
		t.Fatalf("energy taken from an actor the event draws nothing from: %v", err)
	}
}
