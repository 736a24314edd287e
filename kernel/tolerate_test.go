package kernel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// testdata/refused-share is a data folder written by the release before the
// sequencer (b11fb85), through its HTTP API: root created a human with a
// share of 1, which sent 50 concurrent creations of agents with a share of
// 1 each. Entry 2 created the first; entry 3, decided on the same state,
// was written and then refused by the fold ("gives a share of 1 but holds
// 0"): that annald stopped taking writes and would not open the folder
// again.
//
// This release still will not serve the log as it is, and names the way
// back; annald tolerate (Tolerate) accepts entry 3 under root with a
// log.tolerated entry, after which the kernel serves the log, every fold
// passes over entry 3 and checks the rest, and audit lists it.
func TestTolerate_RefusedEntryFromTheReleaseBeforeTheSequencer(t *testing.T) {
	dir := copyDir(t, "testdata/refused-share")
	ctx := context.Background()
	cfg := testConfig(t, dir)
	size := func() uint64 {
		t.Helper()
		key, err := LocalVerifierKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Audit(ctx, LocalLog(dir), key, WithUnsignedTail(dir))
		if err != nil {
			t.Fatal(err)
		}
		return rep.Size + rep.Unsigned
	}

	_, err := Open(cfg)
	var refused *RefusedEntryError
	if !errors.As(err, &refused) || refused.Index != 3 || refused.Gate != GateEnergy || !strings.Contains(err.Error(), "annald tolerate --entry 3") {
		t.Fatalf("open of a log holding a refused entry: %v, want entry 3 named with the way back", err)
	}
	before := size()

	cred, err := os.ReadFile(filepath.Join(dir, logstore.RootCredentialName))
	if err != nil {
		t.Fatal(err)
	}
	root := strings.TrimSpace(string(cred))
	for _, bad := range []struct {
		name    string
		cred    string
		entries []uint64
		reason  string
		want    string
	}{
		{"not root's credential", "annal_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", []uint64{3}, "r", "not root's"},
		{"an entry that folds", root, []uint64{2, 3}, "r", "entry 2 breaks no rule"},
		{"past the log", root, []uint64{3, 9}, "r", "entry 9 is not in the log"},
		{"no reason", root, []uint64{3}, " ", "reason"},
		{"no entry", root, nil, "r", "1 to 64 entries"},
	} {
		if _, err := Tolerate(ctx, cfg, bad.cred, bad.entries, bad.reason); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.name, err, bad.want)
		}
		if got := size(); got != before {
			t.Fatalf("%s: the log went from %d to %d entries", bad.name, before, got)
		}
	}

	rep, err := Tolerate(ctx, cfg, root, []uint64{3}, "two creations raced past a missing claim in b11fb85")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Record != before || len(rep.Entries) != 1 || rep.Entries[0].Index != 3 || rep.Entries[0].Gate != GateEnergy {
		t.Fatalf("tolerate: %+v, want entry 3 accepted at %d", rep, before)
	}
	if _, err := Tolerate(ctx, cfg, root, []uint64{3}, "again"); err == nil || !strings.Contains(err.Error(), "tolerated at entry") {
		t.Fatalf("tolerating entry 3 twice: %v", err)
	}

	key, _ := LocalVerifierKey(dir)
	audit, err := Audit(ctx, LocalLog(dir), key, WithUnsignedTail(dir))
	if err != nil || audit.Broken != nil {
		t.Fatalf("audit after tolerate: %+v %v", audit, err)
	}
	if len(audit.Accepted) != 1 || audit.Accepted[0].Index != 3 || audit.Accepted[0].Record != rep.Record || !strings.Contains(audit.Accepted[0].Why, "raced") {
		t.Fatalf("audit lists %+v as accepted", audit.Accepted)
	}
	if _, err := Rebuild(ctx, cfg); err != nil {
		t.Fatalf("rebuild from the log alone: %v", err)
	}

	k, err := Open(cfg)
	if err != nil {
		t.Fatalf("open after tolerate: %v", err)
	}
	defer k.Close()
	if tol := k.Tolerated(); len(tol) != 1 || tol[0].Record != rep.Record {
		t.Fatalf("the kernel's tolerated entries: %+v", tol)
	}
	entry, err := k.Entry(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := event.Parse(entry)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Actor(ev.Subject.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the agent entry 3 would have created: %v, want not found (the entry changes nothing)", err)
	}
	human, err := k.Actor(ev.Actor)
	if err != nil || human.Share != 0 {
		t.Fatalf("the human gave its one share at entry 2: %+v %v", human, err)
	}
	// The kernel serves and decides again: the human has no share to give.
	if err := k.Ready(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.CreateAgent(ctx, human, ActorRequest{Name: "b", Purpose: "p", Share: ptr[uint64](1)}); !errors.Is(err, ErrInsufficientEnergy) {
		t.Fatalf("a share from a human holding none: %v", err)
	}
	if diff, err := k.stateMatchesReplay(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("state differs from a replay of the log at %v (%v)", diff, err)
	}
}
