package kernel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/session"
)

// activeSession creates a session by root with cfg, admits the agents and
// makes it ACTIVE.
func (g *govKernel) activeSession(id string, cfg session.Config, agents ...*Actor) {
	g.t.Helper()
	ctx := context.Background()
	if _, _, err := g.CreateSession(ctx, g.root, id, cfg); err != nil {
		g.t.Fatal(err)
	}
	g.changeSession(g.root, id, SessionChange{Op: event.SessionOpState, State: string(session.Handshaking)})
	for _, a := range agents {
		g.changeSession(a, id, SessionChange{Op: event.SessionOpJoin})
	}
	g.changeSession(g.root, id, SessionChange{Op: event.SessionOpState, State: string(session.Active)})
}

func (g *govKernel) changeSession(by *Actor, id string, c SessionChange) {
	g.t.Helper()
	if _, err := g.ChangeSession(context.Background(), by, id, c); err != nil {
		g.t.Fatalf("session %s %+v: %v", id, c, err)
	}
}

func oid(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

// §10.1 through the kernel: the state machine, joins only while
// HANDSHAKING, actions only while ACTIVE, ARCHIVED is final.
func TestSpec10_1_SessionLifecycle(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false, "sessions/**:mutate,create")
	if _, _, err := g.CreateSession(ctx, g.root, "s1", session.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ChangeSession(ctx, a, "s1", SessionChange{Op: event.SessionOpJoin}); denialOf(t, err).Gate != GateSession {
		t.Fatalf("joined a CREATED session: %v", err)
	}
	if _, err := g.ChangeSession(ctx, g.root, "s1", SessionChange{Op: event.SessionOpState, State: "ACTIVE"}); err == nil {
		t.Fatal("CREATED → ACTIVE skipped HANDSHAKING")
	}
	g.changeSession(g.root, "s1", SessionChange{Op: event.SessionOpState, State: "HANDSHAKING"})
	g.changeSession(a, "s1", SessionChange{Op: event.SessionOpJoin})
	act := func() error {
		_, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "sessions/s1/notes", Session: "s1"})
		return err
	}
	g.wantGate(act(), GateSession) // HANDSHAKING: no actions yet
	g.changeSession(g.root, "s1", SessionChange{Op: event.SessionOpState, State: "ACTIVE"})
	if err := act(); err != nil {
		t.Fatalf("ACTIVE session: %v", err)
	}
	if _, err := g.ChangeSession(ctx, a, "s1", SessionChange{Op: event.SessionOpState, State: "TERMINATING"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a participant changed the state: %v", err)
	}
	g.changeSession(g.root, "s1", SessionChange{Op: event.SessionOpState, State: "TERMINATING"})
	g.wantGate(act(), GateSession)
	g.changeSession(g.root, "s1", SessionChange{Op: event.SessionOpState, State: "ARCHIVED"})
	if _, err := g.ChangeSession(ctx, g.root, "s1", SessionChange{Op: event.SessionOpState, State: "ACTIVE"}); err == nil {
		t.Fatal("ARCHIVED is not final")
	}
	// §10.2: max_duration_seconds; the kernel moves an expired session to
	// TERMINATING.
	cfg := session.DefaultConfig()
	cfg.MaxDurationSeconds = 60
	g.activeSession("short", cfg, a)
	g.clock.advance(61 * time.Second)
	g.expireControl(ctx)
	se, _ := g.SessionByID("short")
	if se.State != session.Terminating {
		t.Fatalf("expired session is %s", se.State)
	}
}

// §10.2, §17.3: configuration is validated; min_eff_score and
// max_participants hold at join.
func TestSpec17_3_SessionConfigValidation(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	for _, bad := range []func(*session.Config){
		func(c *session.Config) { c.MaxParticipants = 0 },
		func(c *session.Config) { c.MaxParticipants = 1001 },
		func(c *session.Config) { c.MaxDurationSeconds = 604801 },
		func(c *session.Config) { c.MinEffScore = 10001 },
		func(c *session.Config) { c.Isolation = "LOOSE" },
	} {
		cfg := session.DefaultConfig()
		bad(&cfg)
		if _, _, err := g.CreateSession(ctx, g.root, "", cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("config %+v accepted: %v", cfg, err)
		}
	}
	for _, id := range []string{"s1\n", "-s", "s/1", strings.Repeat("s", 257)} {
		if _, _, err := g.CreateSession(ctx, g.root, id, session.DefaultConfig()); !errors.Is(err, ErrInvalid) {
			t.Errorf("session id %q accepted: %v", id, err)
		}
	}
	cfg := session.DefaultConfig()
	cfg.MaxParticipants, cfg.MinEffScore = 1, 7000
	if _, _, err := g.CreateSession(ctx, g.root, "picky", cfg); err != nil {
		t.Fatal(err)
	}
	g.changeSession(g.root, "picky", SessionChange{Op: event.SessionOpState, State: "HANDSHAKING"})
	weak := g.ringAgent(ptr(0.65), false)
	if _, err := g.ChangeSession(ctx, weak, "picky", SessionChange{Op: event.SessionOpJoin}); err == nil {
		t.Fatal("trust 0.65 joined a session with min_eff_score 0.70")
	}
	strong := g.ringAgent(ptr(0.75), false)
	g.changeSession(strong, "picky", SessionChange{Op: event.SessionOpJoin})
	other := g.ringAgent(ptr(0.9), false)
	if _, err := g.ChangeSession(ctx, other, "picky", SessionChange{Op: event.SessionOpJoin}); err == nil {
		t.Fatal("max_participants 1 took a second")
	}
	if _, err := g.ChangeSession(ctx, strong, "picky", SessionChange{Op: event.SessionOpJoin, Agent: other.ID}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a participant admitted another agent: %v", err)
	}
}

// §11.3–11.5 and §20.5 through the kernel: an agent in a session writes
// only its own session's folder; a granted session is readable under
// READ_COMMITTED and never writable; a grant under SNAPSHOT is refused;
// prefix and traversal tricks are denied; no session, no session paths.
func TestAttack_SessionPathTraversal(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false, "sessions/**:mutate,create")
	rc := session.DefaultConfig()
	rc.Isolation = session.ReadCommitted
	g.activeSession("session-1", rc, a)
	g.activeSession("session-2", session.DefaultConfig(), a)
	g.activeSession("session-10", session.DefaultConfig())
	try := func(t event.ActionType, target, sess string) error {
		_, err := g.Submit(ctx, a, ActionRequest{Type: t, Target: target, Session: sess})
		return err
	}
	if err := try(event.Mutate, "sessions/session-1/notes.md", "session-1"); err != nil {
		t.Fatalf("own session: %v", err)
	}
	for _, tc := range []struct {
		t      event.ActionType
		target string
		sess   string
	}{
		{event.Mutate, "sessions/session-10/x", "session-1"},        // a prefix is not a folder
		{event.Mutate, "sessions/session-1x/x", "session-1"},        // nor this one
		{event.Mutate, "sessions/session-2/x", "session-1"},         // another session
		{event.Observe, "sessions/session-2/x", "session-1"},        // not granted yet
		{event.Mutate, "sessions/session-1/x", ""},                  // no session, no scope (§11.4)
		{event.Mutate, "sessions/session-1/x", "session-2"},         // acting in session-2
		{event.Mutate, "sessions", "session-1"},                     // the root of all sessions
		{event.Observe, "sessions/session-10/secret", "session-10"}, // not a participant
	} {
		g.wantGate(try(tc.t, tc.target, tc.sess), GateSession)
	}
	// "session-1/../session-2/x" never reaches the gate: targets have one
	// spelling, and ".." is refused as malformed.
	if err := try(event.Mutate, "sessions/session-1/../session-2/x", "session-1"); denialOf(t, err).Gate != GateForm {
		t.Fatalf("a .. target: %v", err)
	}
	// A resource path with .. is cleaned first, then checked.
	g.wantGate(func() error {
		_, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "sessions/session-1/x", Session: "session-1",
			Resources: &event.Resources{FilesystemWrite: []string{"sessions/session-1/../session-2/x"}}})
		return err
	}(), GateResources)
	// §11.5: grants only under READ_COMMITTED; then reads, never writes.
	if _, err := g.ChangeSession(ctx, g.root, "session-2", SessionChange{Op: event.SessionOpGrant, Granted: "session-1"}); err == nil {
		t.Fatal("a grant under SNAPSHOT was accepted")
	}
	g.changeSession(g.root, "session-1", SessionChange{Op: event.SessionOpGrant, Granted: "session-2"})
	if err := try(event.Observe, "sessions/session-2/x", "session-1"); err != nil {
		t.Fatalf("read of a granted session: %v", err)
	}
	g.wantGate(try(event.Mutate, "sessions/session-2/x", "session-1"), GateSession)
	g.wantGate(try(event.Observe, "sessions/session-10/x", "session-1"), GateSession)
}

// ADR-0023 and §14: an agent's turns become SemanticDeltas chained by
// hash and committed to the log; the chain verifies, each delta is at its
// index under a signed checkpoint, rollback reconstructs any turn, and
// changes that do not fit, repeated turns and outsiders are refused.
func TestADR0023_DeltaChain(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false)
	outsider := g.ringAgent(ptr(0.8), false)
	sandboxed := g.ringAgent(ptr(0.6), false) // Ring 3: no file writes
	g.activeSession("work", session.DefaultConfig(), a, sandboxed)
	turn := func(by *Actor, id string, changes ...delta.Change) (*Receipt, *delta.Delta, error) {
		return g.AppendDelta(ctx, by, "work", DeltaRequest{TurnID: id, Changes: changes})
	}
	must := func(by *Actor, id string, changes ...delta.Change) *delta.Delta {
		t.Helper()
		_, d, err := turn(by, id, changes...)
		if err != nil {
			t.Fatalf("turn %s: %v", id, err)
		}
		return d
	}
	d1 := must(a, "t1", delta.Change{Path: "a.go", Operation: delta.OpCreate, ContentHash: oid('1')}, delta.Change{Path: "b.go", Operation: delta.OpCreate, ContentHash: oid('2')})
	d2 := must(a, "t2", delta.Change{Path: "a.go", Operation: delta.OpModify, ContentHash: oid('3')})
	d3 := must(a, "t3", delta.Change{Path: "b.go", Operation: delta.OpDelete}, delta.Change{Path: "c.go", Operation: delta.OpCreate, ContentHash: oid('4')})
	if d1.ParentHash != delta.ZeroHash || d2.ParentHash != d1.DeltaHash || d3.ParentHash != d2.DeltaHash {
		t.Fatal("deltas are not chained")
	}
	for _, bad := range []struct {
		by      *Actor
		id      string
		changes []delta.Change
		class   error
	}{
		{a, "t4", []delta.Change{{Path: "zzz", Operation: delta.OpModify, ContentHash: oid('5')}}, ErrConflict},  // no such file
		{a, "t5", []delta.Change{{Path: "a.go", Operation: delta.OpCreate, ContentHash: oid('5')}}, ErrConflict}, // exists
		{a, "t1", []delta.Change{{Path: "d.go", Operation: delta.OpCreate, ContentHash: oid('5')}}, ErrConflict}, // turn again
		{a, "t6", []delta.Change{{Path: "../x", Operation: delta.OpCreate, ContentHash: oid('5')}}, ErrInvalid},  // climbs out
		{a, "t7\n", []delta.Change{{Path: "e.go", Operation: delta.OpCreate, ContentHash: oid('5')}}, ErrInvalid},
		{outsider, "t8", []delta.Change{{Path: "f.go", Operation: delta.OpCreate, ContentHash: oid('5')}}, ErrForbidden},
		{sandboxed, "t9", []delta.Change{{Path: "g.go", Operation: delta.OpCreate, ContentHash: oid('5')}}, ErrForbidden},
	} {
		if _, _, err := turn(bad.by, bad.id, bad.changes...); !errors.Is(err, bad.class) {
			t.Errorf("turn %q %+v: %v, want %v", bad.id, bad.changes, err, bad.class)
		}
	}
	deltas, indices, err := g.SessionChain(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 3 {
		t.Fatalf("%d deltas in the chain", len(deltas))
	}
	// The chain the kernel keeps verifies (§14.4), and its head is the
	// files after the last turn.
	if files, err := delta.StateAt(deltas, "t3"); err != nil || !maps.Equal(files, map[string]string{"a.go": oid('3'), "c.go": oid('4')}) {
		t.Fatalf("the chain after t3: %v, %v", files, err)
	}
	// Merkle-anchored: each delta's event is at its index, with a proof.
	for i, index := range indices {
		p, err := g.AwaitInclusionProof(ctx, index)
		if err != nil {
			t.Fatal(err)
		}
		if p.Index != index || deltas[i].DeltaHash == "" {
			t.Fatalf("delta %d: proof for %d", i, p.Index)
		}
	}
	plan, err := g.Rollback(ctx, "work", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Files) != 2 || plan.Files["a.go"] != oid('1') || plan.Files["b.go"] != oid('2') {
		t.Fatalf("files after t1: %v", plan.Files)
	}
	// Undo from the head (a=3, c=4) back to t1 (a=1, b=2): restore a, b; delete c.
	want := map[string]string{"a.go": delta.OpModify + oid('1'), "b.go": delta.OpCreate + oid('2'), "c.go": delta.OpDelete}
	if len(plan.Undo) != len(want) {
		t.Fatalf("undo %+v", plan.Undo)
	}
	for _, c := range plan.Undo {
		if want[c.Path] != c.Operation+c.ContentHash {
			t.Fatalf("undo %+v", plan.Undo)
		}
	}
	if _, err := g.Rollback(ctx, "work", "t9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rollback to an unknown turn: %v", err)
	}
}

// A held action in a session keeps its session: approval re-runs the
// pipeline in that session (and is not rate limited: it is the human's
// act), and commits the action there.
func TestHoldInSessionIsApprovedInThatSession(t *testing.T) {
	g := openGov(t, func(c *Config) { c.DisableRateLimit = false })
	ctx := context.Background()
	na, err := g.CreateAgent(ctx, g.root, ActorRequest{Name: "h", Purpose: "p", Energy: 1000, Grants: grants("sessions/**:mutate"), Trust: ptr(0.8)})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := g.Authenticate(na.Credential)
	g.envelope(g.root, EnvelopeRequest{Holder: a.ID, Budget: 500, Grants: grants("sessions/**:mutate"), HoldOn: grants("sessions/*/release/*:mutate")})
	g.activeSession("rel", session.DefaultConfig(), a)
	rc, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "sessions/rel/release/v1", Session: "rel"})
	if err != nil || rc.Status != StatusHeld {
		t.Fatalf("held: %+v %v", rc, err)
	}
	done, err := g.AnswerHold(ctx, g.root, rc.HoldID, event.HoldApprove, "ok")
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := g.Entry(ctx, done.Index)
	ev, err := event.Parse(entry)
	if err != nil || ev.Kind != event.KindAction || ev.Session != "rel" {
		t.Fatalf("approved action %s (%v)", entry, err)
	}
}

// ADR-0023 end to end: a session's chain, recorded through the kernel,
// exported as an audit bundle of the session's deltas, verifies offline
// as a complete chain (hash-linked from the zero parent) whose every delta
// is in the log under the signed checkpoint (Merkle-anchored).
func TestADR0023_ChainExportVerifiesOffline(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false, "sessions/**:mutate")
	g.activeSession("audit-me", session.DefaultConfig(), a)
	g.activeSession("other", session.DefaultConfig(), a)
	var head string
	for i, ch := range [][]delta.Change{
		{{Path: "a", Operation: delta.OpCreate, ContentHash: oid('1')}},
		{{Path: "a", Operation: delta.OpModify, ContentHash: oid('2')}},
		{{Path: "b", Operation: delta.OpCreate, ContentHash: oid('3')}},
	} {
		// Other events between the deltas: actions in the session, and
		// deltas of another session.
		if _, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "sessions/audit-me/x", Session: "audit-me"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := g.AppendDelta(ctx, a, "other", DeltaRequest{TurnID: fmt.Sprint("o", i), Changes: []delta.Change{{Path: fmt.Sprint("o", i), Operation: delta.OpCreate, ContentHash: oid('9')}}}); err != nil {
			t.Fatal(err)
		}
		rc, d, err := g.AppendDelta(ctx, a, "audit-me", DeltaRequest{TurnID: fmt.Sprint("t", i), Changes: ch})
		if err != nil {
			t.Fatal(err)
		}
		head = d.DeltaHash
		if _, err := g.AwaitInclusionProof(ctx, rc.Index); err != nil {
			t.Fatal(err)
		}
	}
	_, vr := exportAndVerify(t, g.Kernel, ExportSelection{Session: "audit-me", Kind: string(event.KindSessionDelta)})
	if vr.Events != 3 || len(vr.Sessions) != 1 {
		t.Fatalf("bundle holds %d events, %d chains", vr.Events, len(vr.Sessions))
	}
	c := vr.Sessions[0]
	if c.Session != "audit-me" || !c.Complete || c.Deltas != 3 || c.Head != head {
		t.Fatalf("chain %+v, want audit-me complete with 3 deltas, head %s", c, head)
	}
	// All of the session's events: the deltas still form a complete chain
	// among the actions.
	_, vr = exportAndVerify(t, g.Kernel, ExportSelection{Session: "audit-me"})
	if vr.Events < 6 || len(vr.Sessions) != 1 || !vr.Sessions[0].Complete {
		t.Fatalf("session bundle: %d events, chains %+v", vr.Events, vr.Sessions)
	}
}
