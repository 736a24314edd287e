package kernel

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
)

// forge appends entries to a stopped kernel's log the way only someone
// holding the log key can: straight into Tessera, signed checkpoints and
// all, past every gate of the kernel.
func forge(t *testing.T, dir string, events ...*event.Event) {
	t.Helper()
	sk, err := os.ReadFile(filepath.Join(dir, logstore.SigningKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := checkpoints.NewLogSigner(strings.TrimSpace(string(sk)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	driver, err := posix.New(ctx, posix.Config{Path: filepath.Join(dir, logstore.LogDirName)})
	if err != nil {
		t.Fatal(err)
	}
	app, shutdown, _, err := tessera.NewAppender(ctx, driver, tessera.NewAppendOptions().WithCheckpointSigner(signer).
		WithBatching(1, time.Millisecond).WithCheckpointInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		entry, err := event.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := app.Add(ctx, tessera.NewEntry(entry))(); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		t.Fatal(err)
	}
}

// auditLog is a kernel's log with an agent whose envelope root revoked;
// it returns the data folder, closed, the agent and the revoked envelope.
func auditLog(t *testing.T) (dir string, agent *Actor, env string, at time.Time) {
	t.Helper()
	dir = t.TempDir()
	g := openGov(t, func(c *Config) { c.DataDir = dir })
	a, _ := g.agent(1000, "workspace/**:mutate,execute")
	v := g.envelope(g.root, EnvelopeRequest{Holder: a.ID, Budget: 500, Grants: grants("workspace/**:mutate,execute")})
	if _, err := g.submit(a, event.Mutate, "workspace/before"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.RevokeEnvelope(context.Background(), g.root, v.ID, "done"); err != nil {
		t.Fatal(err)
	}
	at = g.clock.Now().Add(time.Second)
	if diff, err := g.stateMatchesReplay(context.Background()); err != nil || len(diff) > 0 {
		t.Fatalf("state differs from a replay: %v %v", diff, err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, a, v.ID, at
}

func forgedAction(agent, env string, at time.Time, a event.Action, cost uint64) *event.Event {
	id, _ := newEventID()
	a.Envelope = env
	return &event.Event{V: event.Version, ID: id, Time: event.At(at), Kind: event.KindAction, Actor: agent, Action: &a,
		Decision: &event.Decision{Outcome: event.OutcomeCommitted, Cost: cost, Reserved: cost, Settled: cost}}
}

// annald audit replays a log from its tiles and names the first entry that
// breaks a rule, whoever signed it: an action logged after its envelope was
// revoked, and an execute charged less than its logged payload costs.
func TestAudit_FindsForgedEntries(t *testing.T) {
	oid := "sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		name   string
		forged func(a *Actor, env string, at time.Time) *event.Event
		gate   string
		want   string
	}{
		{"an action after a revoke", func(a *Actor, env string, at time.Time) *event.Event {
			return forgedAction(a.ID, env, at, event.Action{Type: event.Mutate, Target: "workspace/after"}, 15)
		}, GateEnvelope, "is revoked"},
		{"an execute with no envelope", func(a *Actor, _ string, at time.Time) *event.Event {
			payload := `{"artifact_hash":"` + oid + `","exit_code":0,"input_oid":"` + oid + `","output_oid":"` + oid + `"}`
			return forgedAction(a.ID, "", at, event.Action{Type: event.Execute, Target: "workspace/run", Payload: []byte(payload)}, 25)
		}, GateEnvelope, "holds no live envelope"},
		{"an execute result of no intent", func(a *Actor, env string, at time.Time) *event.Event {
			payload := `{"artifact_hash":"` + oid + `","exit_code":0,"input_oid":"` + oid + `","intent":3,"output_oid":"` + oid + `"}`
			return forgedAction(a.ID, env, at, event.Action{Type: event.Execute, Target: "workspace/run", Payload: []byte(payload)}, 0)
		}, ledger.GateIntent, "not an open execute intent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, a, env, at := auditLog(t)
			key, err := LocalVerifierKey(dir)
			if err != nil {
				t.Fatal(err)
			}
			clean, err := Audit(context.Background(), LocalLog(dir), key)
			if err != nil || clean.Broken != nil || clean.Folded != clean.Size || clean.Rules != ledger.Rules {
				t.Fatalf("audit of the kernel's own log: %+v, %v", clean, err)
			}
			forge(t, dir, tc.forged(a, env, at))
			for _, src := range []struct {
				name string
				src  func() LogSource
			}{
				{"local", func() LogSource { return LocalLog(dir) }},
				{"url", func() LogSource {
					srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(dir, logstore.LogDirName))))
					t.Cleanup(srv.Close)
					s, err := RemoteLog(srv.URL)
					if err != nil {
						t.Fatal(err)
					}
					return s
				}},
			} {
				rep, err := Audit(context.Background(), src.src(), key)
				if err != nil {
					t.Fatalf("%s: %v", src.name, err)
				}
				if rep.Broken == nil || rep.Broken.Index != clean.Size || rep.Broken.Gate != tc.gate || !strings.Contains(rep.Broken.Reason, tc.want) {
					t.Fatalf("%s: audit found %+v, want entry %d broken by the %s gate (%q)", src.name, rep.Broken, clean.Size, tc.gate, tc.want)
				}
			}
			// The kernel itself will not start on a log that breaks its rules.
			if _, err := Open(testConfig(t, dir)); err == nil || !strings.Contains(err.Error(), "breaks the "+tc.gate+" rule") {
				t.Fatalf("Open on the forged log: %v", err)
			}
		})
	}
}

// A cost that does not match the payload, under a live envelope: the energy
// gate recomputes the cost from the logged bytes.
func TestAudit_FindsAForgedCost(t *testing.T) {
	dir := t.TempDir()
	g := openGov(t, func(c *Config) { c.DataDir = dir })
	a, _ := g.agent(10_000, "workspace/**:execute")
	v := g.envelope(g.root, EnvelopeRequest{Holder: a.ID, Budget: 10_000, Grants: grants("workspace/**:execute")})
	at := g.clock.Now().Add(time.Second)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	oid := "sha256:" + strings.Repeat("b", 64)
	payload := `{"artifact_hash":"` + oid + `","exit_code":0,"input_oid":"` + oid + `","output_bytes":1000000,"output_oid":"` + oid + `"}`
	forge(t, dir, forgedAction(a.ID, v.ID, at, event.Action{Type: event.Execute, Target: "workspace/run", Payload: []byte(payload)}, 25))
	key, _ := LocalVerifierKey(dir)
	rep, err := Audit(context.Background(), LocalLog(dir), key)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Broken == nil || rep.Broken.Gate != GateEnergy || !strings.Contains(rep.Broken.Reason, "costs 3931") {
		t.Fatalf("audit found %+v, want the energy gate to recompute 25 + 1000000/256 = 3931", rep.Broken)
	}
}

// Audit checks that the tiles are the log the checkpoint signs.
func TestAudit_RefusesTilesTheCheckpointDoesNotSign(t *testing.T) {
	dir, _, _, _ := auditLog(t)
	key, _ := LocalVerifierKey(dir)
	other := t.TempDir()
	og := openGov(t, func(c *Config) { c.DataDir = other })
	og.Close()
	otherKey, _ := LocalVerifierKey(other)
	if _, err := Audit(context.Background(), LocalLog(dir), otherKey); err == nil {
		t.Fatal("audit accepted a checkpoint signed by another key")
	}
	// Swap in the other log's entries under this log's checkpoint.
	entries := filepath.Join(dir, logstore.LogDirName, "tile", "entries")
	if err := os.RemoveAll(entries); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(other, logstore.LogDirName, "tile", "entries"), entries); err != nil {
		t.Fatal(err)
	}
	if _, err := Audit(context.Background(), LocalLog(dir), key); err == nil {
		t.Fatal("audit accepted entries that do not hash to the signed root")
	}
}
