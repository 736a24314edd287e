package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/google/uuid"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
)

// annald audit, from outside: a log the kernel wrote passes, read from its
// folder or from annald's own tiles over HTTP; after someone holding the
// log key appends an action under a revoked envelope, audit names that
// entry and the envelope rule, and exits 1.
func TestAuditCommand(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon(t, dir)
	ctx := context.Background()
	root := d.client(t, d.rootCredential(t))
	trust := 0.8
	agent, err := root.CreateAgent(ctx, api.AgentRequest{Name: "a", Purpose: "audit", Energy: 1000, Trust: &trust,
		Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := root.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: agent.ID, Budget: 100, Grants: []api.Grant{{Pattern: "workspace/**", Actions: []string{"mutate"}}}})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := d.client(t, agent.Credential).SubmitAndWait(ctx, api.ActionRequest{Type: "mutate", Target: "workspace/a", Envelope: env.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.RevokeEnvelope(ctx, env.ID, "done"); err != nil {
		t.Fatal(err)
	}
	vkeyFile := filepath.Join(t.TempDir(), "log.pub")
	if err := os.WriteFile(vkeyFile, []byte(d.vkey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(annaldBinary, "audit", "--url", d.url, "--key", "@"+vkeyFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hashes to its root") || strings.Contains(string(out), "BROKEN") {
		t.Fatalf("audit of a running kernel's log over HTTP: %v\n%s", err, out)
	}
	d.stop(t)

	forgeEntry(t, dir, &event.Event{V: event.Version, ID: uuid.Must(uuid.NewV7()).String(), Time: event.At(time.Now()), Kind: event.KindAction,
		Actor: agent.ID, Action: &event.Action{Type: event.Mutate, Target: "workspace/forged", Envelope: env.ID},
		Decision: &event.Decision{Outcome: event.OutcomeCommitted, Cost: 15, Reserved: 15, Settled: 15}})
	out, err = exec.Command(annaldBinary, "audit", "--data", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "BROKEN: entry ") || !strings.Contains(string(out), "breaks the envelope rule") || !strings.Contains(string(out), "is revoked") {
		t.Fatalf("audit of the forged log: %v\n%s", err, out)
	}
	js, _ := exec.Command(annaldBinary, "audit", "--data", dir, "--json").Output()
	var rep struct {
		Size   uint64 `json:"size"`
		Broken *struct {
			Index uint64 `json:"index"`
			Actor string `json:"actor"`
		} `json:"broken"`
	}
	if err := json.Unmarshal(js, &rep); err != nil || rep.Broken == nil || rep.Broken.Index != rep.Size-1 || rep.Broken.Index <= rc.Index || rep.Broken.Actor != agent.ID {
		t.Fatalf("audit --json names %+v of %d entries (%v), want the last, the forged one\n%s", rep.Broken, rep.Size, err, js)
	}
}

// forgeEntry appends an entry to a stopped annald's log with the log key,
// past every gate of the kernel.
func forgeEntry(t *testing.T, dir string, ev *event.Event) {
	t.Helper()
	sk, err := os.ReadFile(filepath.Join(dir, "log.key"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := checkpoints.NewLogSigner(strings.TrimSpace(string(sk)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	driver, err := posix.New(ctx, posix.Config{Path: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	app, shutdown, _, err := tessera.NewAppender(ctx, driver, tessera.NewAppendOptions().WithCheckpointSigner(signer).
		WithBatching(1, time.Millisecond).WithCheckpointInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	entry, err := event.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Add(ctx, tessera.NewEntry(entry))(); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		t.Fatal(err)
	}
}
