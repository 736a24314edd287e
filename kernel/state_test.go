package kernel

import (
	"context"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// TestFoldIsIdempotent: folding the whole log again, from the start, over a
// state that has already folded it changes nothing and raises no error; this
// is what recovery after a crash relies on.
func TestFoldIsIdempotent(t *testing.T) {
	ctx := context.Background()
	k := openTest(t, t.TempDir())
	defer k.Close()
	na, err := k.CreateAgent(ctx, rootOf(t, k), AgentRequest{Name: "a", Purpose: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Fold(ctx); err != nil {
		t.Fatal(err)
	}
	size, _ := k.log.integratedSize(ctx)
	k.state.mu.Lock()
	k.state.folded = 0 // as if the watermark had not been recorded
	k.state.mu.Unlock()
	if err := k.state.foldTo(ctx, k.log, size); err != nil {
		t.Fatalf("second fold: %v", err)
	}
	a, err := k.Authenticate(na.Credential)
	if err != nil || a.CreatedAt != na.Index {
		t.Fatalf("after refold: %v %+v", err, a)
	}
}

// TestFoldRefusesASecondCreationOfOneActor: a log in which two events create
// the same actor is corrupt, and folding it fails loudly.
func TestFoldRefusesASecondCreationOfOneActor(t *testing.T) {
	k := openTest(t, t.TempDir())
	defer k.Close()
	root, _ := k.Actor(RootID)
	again := &event.Event{Kind: event.KindActorCreated, Subject: &root.ActorRecord}
	err := k.state.apply([]indexedEvent{{index: 7, ev: again}}, 0)
	if err == nil || !strings.Contains(err.Error(), "already created") {
		t.Fatalf("second creation of root: %v", err)
	}
	twice := &event.Event{Kind: event.KindActorCreated, Subject: &event.ActorRecord{ID: "agent-x", Kind: event.Agent, Name: "x", Creator: RootID, Purpose: "p", CredentialSHA256: strings.Repeat("0", 64)}}
	err = k.state.apply([]indexedEvent{{index: 8, ev: twice}, {index: 9, ev: twice}}, 0)
	if err == nil || !strings.Contains(err.Error(), "already created") {
		t.Fatalf("two creations in one fold: %v", err)
	}
	if _, err := k.Actor("agent-x"); err == nil {
		t.Fatal("a failed fold left its actor in state")
	}
}
