package kernel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/session"
	"github.com/annal-dev/annal/verifier"
)

// retentionWorld is a kernel whose deltas are kept for retention, and an
// ACTIVE session "kept" of a day with an agent that records deltas.
func retentionWorld(t *testing.T, retention time.Duration) (*govKernel, *Actor) {
	g := openGov(t, func(c *Config) { c.DeltaRetention = retention })
	a := g.ringAgent(ptr(0.8), false, "sessions/**:mutate")
	cfg := session.DefaultConfig()
	cfg.MaxDurationSeconds = 86400
	g.activeSession("kept", cfg, a)
	return g, a
}

func (g *govKernel) loggedDelta(index uint64) (*event.Event, []byte) {
	g.t.Helper()
	entry, err := g.Entry(context.Background(), index)
	if err != nil {
		g.t.Fatal(err)
	}
	ev, err := event.Parse(entry)
	if err != nil || ev.Delta == nil {
		g.t.Fatalf("entry %d: %v", index, err)
	}
	return ev, entry
}

// §14.7: a delta's changes are kept sealed for the retention set, then
// erased by the kernel's own subject.erased; the changes of a younger
// delta stay readable; the delta hashes, the chain and the log's proofs
// verify before and after, offline too.
func TestSpec004_14_7_DeltaChangesErasedWhenRetentionEnds(t *testing.T) {
	g, a := retentionWorld(t, 2*time.Hour)
	ctx := context.Background()
	first := []delta.Change{{Path: "private/diary.md", Operation: delta.OpCreate, ContentHash: oid('1')}}
	second := []delta.Change{{Path: "private/diary.md", Operation: delta.OpModify, ContentHash: oid('2')}}
	rc1, d1, err := g.AppendDelta(ctx, a, "kept", DeltaRequest{TurnID: "t1", Changes: first})
	if err != nil {
		t.Fatal(err)
	}
	// A delta the kernel refuses (turn t1 again) leaves nothing sealed.
	keys := filepath.Join(g.cfg.DataDir, "sealed", "keys")
	if _, _, err := g.AppendDelta(ctx, a, "kept", DeltaRequest{TurnID: "t1", Changes: second}); !errors.Is(err, ErrConflict) {
		t.Fatalf("turn t1 again: %v", err)
	}
	if n := countFiles(t, keys); n != 1 {
		t.Fatalf("%d keys after one delta and one refused", n)
	}
	g.clock.advance(time.Hour)
	rc2, d2, err := g.AppendDelta(ctx, a, "kept", DeltaRequest{TurnID: "t2", Changes: second})
	if err != nil {
		t.Fatal(err)
	}
	// The kernel still checks that changes fit the session's files, though
	// the ledger no longer keeps them: a create of an existing file is
	// refused.
	if _, _, err := g.AppendDelta(ctx, a, "kept", DeltaRequest{TurnID: "t3", Changes: first}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a create of an existing file: %v", err)
	}
	g.chainFiles.Delete("kept") // and so it does reading the chain, as after a restart
	if _, _, err := g.AppendDelta(ctx, a, "kept", DeltaRequest{TurnID: "t3", Changes: first}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a create of an existing file, the chain read: %v", err)
	}
	// The log holds the commitment, not the changes.
	ev1, entry1 := g.loggedDelta(rc1.Index)
	until, _ := ev1.Delta.Sealed.RetainUntilTime()
	if ev1.Delta.Changes != nil || bytes.Contains(entry1, []byte("diary")) || !until.Equal(ev1.Time.Time.Add(2*time.Hour)) {
		t.Fatalf("logged delta %s", entry1)
	}
	if ev1.Delta.DeltaHash != d1.DeltaHash {
		t.Fatalf("the logged delta's hash %s is not the one answered, %s", ev1.Delta.DeltaHash, d1.DeltaHash)
	}
	// While kept, the chain is read with its changes.
	chain, _, err := g.SessionChain(ctx, "kept")
	if err != nil || len(chain) != 2 || !slices.Equal(chain[0].Changes, first) || !slices.Equal(chain[1].Changes, second) {
		t.Fatalf("chain %+v %v", chain, err)
	}
	if _, err := g.Rollback(ctx, "kept", "t1"); err != nil {
		t.Fatal(err)
	}

	// One second short of the first delta's retention: nothing is erased,
	// and the fold refuses the kernel's erasure.
	g.clock.advance(time.Hour - time.Second)
	size := g.size()
	g.expireRetention(ctx)
	if g.size() != size {
		t.Fatal("a delta's changes were erased before their retention ended")
	}
	early := &event.Event{V: event.Version, ID: "0190f1a8-7c00-7d00-8e00-0000000000e7", Time: event.At(g.clock.Now()), Kind: event.KindSubjectErased,
		Actor: event.KernelActor, Session: "kept", Erasure: &event.Erasure{Subject: d1.Sealed.Subject}}
	g.mu.Lock()
	err = g.ledger.Check(early, ledger.Options{})
	g.mu.Unlock()
	if err == nil {
		t.Fatal("the fold allows the kernel to erase a delta's changes before their retention ends")
	}

	// Past it: the first delta's changes are erased by the kernel.
	g.clock.advance(time.Second)
	g.expireRetention(ctx)
	var erasure *event.Event
	for i := size; i < g.size(); i++ {
		entry, _ := g.Entry(ctx, i)
		if ev, _ := event.Parse(entry); ev != nil && ev.Kind == event.KindSubjectErased {
			erasure = ev
		}
	}
	if erasure == nil || erasure.Actor != event.KernelActor || erasure.Session != "kept" || erasure.Erasure.Subject != delta.SubjectOf(d1.DeltaID) {
		t.Fatalf("the erasure %+v", erasure)
	}
	if _, _, err := g.OpenSealed(&event.SealedPayload{Subject: d1.Sealed.Subject, Commitment: d1.Sealed.Commitment}); !errors.Is(err, ErrErased) {
		t.Fatalf("the erased changes open: %v", err)
	}
	if g.sealed.Holds(d1.Sealed.Subject) || !g.sealed.Holds(d2.Sealed.Subject) {
		t.Fatal("the wrong key was destroyed")
	}
	if n := countFiles(t, filepath.Join(g.cfg.DataDir, "sealed", "payloads", d1.Sealed.Subject)); n != 0 {
		t.Fatalf("%d files of the erased changes are left in the data folder", n)
	}
	chain, _, err = g.SessionChain(ctx, "kept")
	if err != nil || chain[0].Changes != nil || !slices.Equal(chain[1].Changes, second) {
		t.Fatalf("after erasure, the chain %+v %v", chain, err)
	}
	if _, err := g.Rollback(ctx, "kept", "t2"); !errors.Is(err, ErrErased) {
		t.Fatalf("a rollback needing erased changes: %v", err)
	}
	// Nothing more to erase until the second delta's time.
	size = g.size()
	g.expireRetention(ctx)
	if g.size() != size {
		t.Fatal("an erasure was logged twice")
	}

	// Hashes are permanent: the chain recomputes from the log alone, and an
	// exported bundle of the session verifies offline, proofs and all.
	_, e2 := g.loggedDelta(rc2.Index)
	c, err := verifier.VerifyDeltaChain([][]byte{entry1, e2}, true)
	if err != nil || c.Head != d2.DeltaHash {
		t.Fatalf("the chain after erasure: %+v %v", c, err)
	}
	if _, err := g.AwaitInclusionProof(ctx, g.size()-1); err != nil {
		t.Fatal(err)
	}
	_, vr := exportAndVerify(t, g.Kernel, ExportSelection{Session: "kept"})
	if len(vr.Sessions) != 1 || !vr.Sessions[0].Complete || vr.Sessions[0].Head != d2.DeltaHash {
		t.Fatalf("bundle chains %+v", vr.Sessions)
	}
	// The bundle opens the kept changes (checked against their commitment)
	// and carries only the commitment of the erased ones.
	if vr.Sealed.Opened != 1 || vr.Sealed.Closed != 1 {
		t.Fatalf("bundle's sealed payloads %+v: want the kept changes opened, the erased closed", vr.Sealed)
	}
	// The state is what replaying the log gives.
	if rep, err := Audit(ctx, LocalLog(g.cfg.DataDir), g.VerifierKey()); err != nil || rep.Broken != nil {
		t.Fatalf("audit after erasure: %+v %v", rep, err)
	}
}

func countFiles(t *testing.T, dir string) int {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// §14.7: the default retention is the seed's 180 days; a kernel set to
// keep deltas for good (0) logs their changes themselves.
func TestSpec004_14_7_RetentionSetting(t *testing.T) {
	if got := DefaultConfig(t.TempDir()).DeltaRetention; got != 180*24*time.Hour {
		t.Fatalf("default delta retention %v", got)
	}
	for _, retention := range []time.Duration{delta.DefaultRetention, 0} {
		g, a := retentionWorld(t, retention)
		rc, _, err := g.AppendDelta(context.Background(), a, "kept", DeltaRequest{TurnID: "t1",
			Changes: []delta.Change{{Path: "a", Operation: delta.OpCreate, ContentHash: oid('1')}}})
		if err != nil {
			t.Fatal(err)
		}
		ev, _ := g.loggedDelta(rc.Index)
		switch {
		case retention == 0 && (ev.Delta.Sealed != nil || len(ev.Delta.Changes) != 1):
			t.Errorf("kept for good: logged %+v", ev.Delta)
		case retention != 0 && (ev.Delta.Sealed == nil || ev.Delta.Sealed.RetainUntil != ev.Time.Add(retention).String()):
			t.Errorf("retention %v: logged %+v", retention, ev.Delta)
		}
	}
	cfg := DefaultConfig(t.TempDir())
	cfg.DeltaRetention = time.Second
	if _, err := Open(cfg); err == nil {
		t.Fatal("a retention of a second was taken")
	}
}
