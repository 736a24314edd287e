package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// A kernel that meets a durable entry its fold refuses — which only a bug
// can write now, and which releases before the sequencer wrote when
// requests raced (here: claims and the sequencer off, and the share race)
// — stops taking writes, and answers every request at once, saying why;
// it closes within the 5 s a stop may take, and the folder it leaves is
// refused at the next open, naming the entry and the way back.
func TestUnfoldableEntryStopsWritesAndAnswersAtOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.claimsOff, cfg.sequencerOff = true, true
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root := rootOf(t, k)
	for round := 0; k.Ready() == nil; round++ {
		if round == 20 {
			t.Fatal("20 rounds of the share race without claims or sequencer wrote no refused entry")
		}
		na, err := k.CreateAgent(ctx, root, ActorRequest{Kind: event.Human, Name: "h", Purpose: "p", Share: ptr[uint64](1)})
		if err != nil {
			break // the kernel stopped while the round before settled
		}
		human, _ := k.Authenticate(na.Credential)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k.CreateAgent(ctx, human, ActorRequest{Name: fmt.Sprint("a", i), Purpose: "x", Share: ptr[uint64](1)})
			}()
		}
		wg.Wait()
	}
	why := k.Ready()
	if why == nil || !errors.Is(why, ledger.ErrInconsistent) {
		t.Fatalf("ready after the race: %v, want the refused entry named", why)
	}

	// Every kind of request is answered at once.
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"ready", func() error { return k.Ready() }},
		{"submit", func() error {
			_, err := k.Submit(ctx, root, ActionRequest{Type: event.Observe, Target: "workspace/x"})
			return err
		}},
		{"create", func() error {
			_, err := k.CreateAgent(ctx, root, ActorRequest{Name: "late", Purpose: "p"})
			return err
		}},
		{"history", func() error {
			_, err := k.History(ctx, root, HistoryQuery{})
			return err
		}},
		{"info", func() error {
			_, err := k.Info(ctx)
			return err
		}},
		{"holds", func() error { k.Holds(root, ""); return nil }},
		{"actors", func() error { k.Actors(root); return nil }},
	} {
		start := time.Now()
		err := c.call()
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s took %v on a stopped kernel (%v)", c.name, took, err)
		}
		if (c.name == "submit" || c.name == "create") && (!errors.Is(err, logstore.ErrUnavailable) || !errors.Is(err, ErrStopped)) {
			t.Errorf("%s on a stopped kernel: %v, want unavailable until an operator acts (not worth a retry)", c.name, err)
		}
	}

	start := time.Now()
	k.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("close took %v", took)
	}
	_, err = Open(testConfig(t, dir))
	var refused *RefusedEntryError
	if !errors.As(err, &refused) {
		t.Fatalf("open of the folder the stopped kernel left: %v", err)
	}
}
