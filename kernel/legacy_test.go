package kernel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// copyDir copies a fixture data folder so that a test may change it.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// testdata/legacy-v1 is a data folder written by the release before rules
// versions (state file included), through its HTTP API: an agent with an
// approved hold, an agent that delegated after it had expired, an agent
// that granted its session reads of root's, and an agent killed and then
// unfrozen (a kill only froze). The first two broke rules that release did
// not check.
//
// The migration: this release folds such a log under rules 1 — every
// inconsistency refused, a later rule tolerated and counted — refolds the
// stale state file, and appends one log.rules entry from which every rule
// holds.
func TestLegacyLogFromTheFirstReleaseFolds(t *testing.T) {
	dir := copyDir(t, "testdata/legacy-v1")
	key, err := LocalVerifierKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, err := Audit(ctx, LocalLog(dir), key)
	if err != nil || before.Broken != nil || before.Rules != ledger.RulesLegacy || len(before.Tolerated) != 2 {
		t.Fatalf("audit of the legacy log: %+v %v", before, err)
	}
	for i, want := range []string{"expired at", "may not grant reads of session session-2"} {
		if !strings.Contains(before.Tolerated[i].Reason, want) {
			t.Errorf("tolerated %d: %v, want %q", i, before.Tolerated[i], want)
		}
	}
	k, err := Open(testConfig(t, dir))
	if err != nil {
		t.Fatalf("open the legacy log: %v", err)
	}
	last, err := k.Entry(ctx, before.Size)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := event.Parse(last); err != nil || ev.Kind != event.KindRulesAdopted || ev.Log.Rules != ledger.Rules {
		t.Fatalf("entry %d after the legacy ones: %s (%v), want log.rules", before.Size, last, err)
	}
	// From here on the rules hold: the expired agent delegates no more.
	cred, _ := os.ReadFile(filepath.Join(dir, logstore.RootCredentialName))
	root, err := k.Authenticate(strings.TrimSpace(string(cred)))
	if err != nil {
		t.Fatal(err)
	}
	expired, err := k.Actor("agent-cc496eea076b")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = k.IssueEnvelope(ctx, expired, EnvelopeRequest{Holder: "agent-9dcfba6b4ce2", Parent: "env-5e34e34e0156e110", Budget: 1, Grants: grants("workspace/**:mutate")})
	if d := denialOf(t, err); d.Gate != GateActor || !errors.Is(err, ErrForbidden) {
		t.Fatalf("expired agent delegates under the adopted rules: %v", err)
	}
	if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Mutate, Target: "workspace/after-migration"}); err != nil {
		t.Fatalf("root acts on the migrated log: %v", err)
	}
	if diff, err := k.stateMatchesReplay(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("state after migration differs from a replay: %v %v", diff, err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := Audit(ctx, LocalLog(dir), key)
	if err != nil || after.Broken != nil || after.Rules != ledger.Rules || len(after.Tolerated) != 2 {
		t.Fatalf("audit after migration: %+v %v", after, err)
	}
}
