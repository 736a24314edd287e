package kernel

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

func testConfig(t testing.TB, dir string) Config {
	t.Helper()
	cfg := DefaultConfig(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.FoldInterval = 50 * time.Millisecond
	cfg.DisableProduction = true // tests count entries; production has its own tests
	cfg.DisableRateLimit = true  // tests race many actions; the rate limit gate has its own tests
	return cfg
}

func openTest(t *testing.T, dir string) *Kernel {
	t.Helper()
	k, err := Open(testConfig(t, dir))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return k
}

func rootOf(t testing.TB, k *Kernel) *Actor {
	t.Helper()
	cred, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}
	a, err := k.Authenticate(strings.TrimSpace(string(cred)))
	if err != nil {
		t.Fatalf("root credential does not authenticate: %v", err)
	}
	return a
}

func TestFirstStartCreatesGenesisAndRoot(t *testing.T) {
	dir := t.TempDir()
	k := openTest(t, dir)
	defer k.Close()
	root := rootOf(t, k)
	if root.ID != RootID || !root.IsHuman() {
		t.Fatalf("root = %+v", root)
	}
	entry, err := k.Entry(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := event.Parse(entry)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != event.KindGenesis || ev.Log.Origin != k.Origin() {
		t.Fatalf("entry 0 = %s", entry)
	}
	for _, f := range []string{logstore.SigningKeyFileName, logstore.RootCredentialName} {
		fi, err := os.Stat(dir + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
}

func TestSubmitReceiptAndProof(t *testing.T) {
	ctx := context.Background()
	k := openTest(t, t.TempDir())
	defer k.Close()
	root := rootOf(t, k)
	r, err := k.Submit(ctx, root, ActionRequest{Type: event.Mutate, Target: "workspace/notes.md", Payload: []byte(`{"b": 1, "a": "x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Index != 1 || r.Cost != event.DefaultEnergy.Costs.Mutate {
		t.Fatalf("receipt = %+v", r)
	}
	entry, err := k.Entry(ctx, r.Index)
	if err != nil {
		t.Fatal(err)
	}
	leaf := event.LeafHash(entry)
	if hex.EncodeToString(leaf[:]) != r.LeafHash {
		t.Fatalf("receipt leaf hash %s, entry hashes to %x", r.LeafHash, leaf)
	}
	if !strings.Contains(string(entry), `"payload":{"a":"x","b":1}`) {
		t.Fatalf("payload not canonical in %s", entry)
	}
	p, err := k.AwaitInclusionProof(ctx, r.Index)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := checkpoints.NewLogVerifier(k.VerifierKey())
	cp, err := checkpoints.OpenCheckpoint(p.Checkpoint, v)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([][]byte, len(p.Hashes))
	for i := range p.Hashes {
		hashes[i] = p.Hashes[i][:]
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, r.Index, cp.Size, leaf[:], hashes, cp.Hash[:]); err != nil {
		t.Fatalf("inclusion proof does not verify: %v", err)
	}
}

func TestSubmitDenials(t *testing.T) {
	ctx := context.Background()
	k := openTest(t, t.TempDir())
	defer k.Close()
	root := rootOf(t, k)
	big := `{"x":"` + strings.Repeat("a", event.MaxEntrySize) + `"}`
	for _, tc := range []struct {
		name  string
		req   ActionRequest
		stage string
		class error
	}{
		{"unknown type", ActionRequest{Type: "delete", Target: "a"}, StageValidate, ErrInvalid},
		{"dot-dot target", ActionRequest{Type: event.Mutate, Target: "a/../b"}, StageValidate, ErrInvalid},
		{"duplicate key", ActionRequest{Type: event.Mutate, Target: "a", Payload: []byte(`{"a":1,"a":2}`)}, StageValidate, ErrInvalid},
		{"inexact number", ActionRequest{Type: event.Mutate, Target: "a", Payload: []byte(`{"n":9007199254740993}`)}, StageValidate, ErrInvalid},
		{"execute without oids", ActionRequest{Type: event.Execute, Target: "a", Payload: []byte(`{"exit_code":0}`)}, StageValidatePayload, ErrInvalid},
		{"oversize", ActionRequest{Type: event.Mutate, Target: "a", Payload: []byte(big)}, StageAppend, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.Submit(ctx, root, tc.req)
			var d *Denial
			if !errors.As(err, &d) || d.Stage != tc.stage || !errors.Is(err, tc.class) {
				t.Fatalf("err = %v, want a %v denial at %s", err, tc.class, tc.stage)
			}
		})
	}
	if size, _ := k.log.Size(ctx); size != 1 {
		t.Fatalf("log size %d after denials, want 1 (genesis only)", size)
	}
}

func TestAgentsActAndOnlyHumansCreate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k := openTest(t, dir)
	root := rootOf(t, k)
	na, err := k.CreateAgent(ctx, root, ActorRequest{Name: "scribe", Purpose: "takes notes", Energy: 100,
		Grants: []event.Grant{{Pattern: "workspace/**", Actions: []event.ActionType{"create"}}}, Trust: ptr(0.8)})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := k.Authenticate(na.Credential)
	if err != nil || agent.ID != na.Actor.ID || agent.Creator != RootID {
		t.Fatalf("agent credential: %v %+v", err, agent)
	}
	if _, err := k.Submit(ctx, agent, ActionRequest{Type: event.Create, Target: "workspace/a"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("agent acted without an envelope: %v", err)
	}
	if _, _, err := k.IssueEnvelope(ctx, root, EnvelopeRequest{Holder: agent.ID, Budget: 50,
		Grants: []event.Grant{{Pattern: "workspace/*", Actions: []event.ActionType{"create"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Submit(ctx, agent, ActionRequest{Type: event.Create, Target: "workspace/a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.CreateAgent(ctx, agent, ActorRequest{Name: "child", Purpose: "x"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("agent created an agent: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	// A second start reuses everything and still knows the agent.
	k2 := openTest(t, dir)
	defer k2.Close()
	if _, err := k2.Authenticate(na.Credential); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if k2.Origin() != k.Origin() || k2.VerifierKey() != k.VerifierKey() {
		t.Fatal("restart changed origin or key")
	}
}

func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	k := openTest(t, dir)
	defer k.Close()
	if _, err := Open(testConfig(t, dir)); !errors.Is(err, logstore.ErrDataDirInUse) {
		t.Fatalf("second Open: %v, want ErrDataDirInUse", err)
	}
}

func TestStateRebuiltFromLogAfterStateLoss(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k := openTest(t, dir)
	na, err := k.CreateAgent(ctx, rootOf(t, k), ActorRequest{Name: "a", Purpose: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir + "/" + logstore.StateFileName); err != nil {
		t.Fatal(err)
	}
	k2 := openTest(t, dir)
	defer k2.Close()
	if _, err := k2.Authenticate(na.Credential); err != nil {
		t.Fatalf("agent lost after state rebuild: %v", err)
	}
}
