package kernel

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/annal-dev/annal/internal/procmem"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// releaseMappedPages lets go of the state file's pages the kernel read,
// and what the state holds reads back the same after.
func TestStore_ReleaseMappedPages(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("no /proc/self/smaps here")
	}
	k := openTest(t, t.TempDir())
	defer k.Close()
	ctx := context.Background()
	root := rootOf(t, k)
	for i := range 2000 {
		if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: fmt.Sprintf("release/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.persist(); err != nil {
		t.Fatal(err)
	}
	read := func() []uint64 { // the history reads its index from the state file
		var got []uint64
		page, err := k.History(ctx, root, HistoryQuery{Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			got = append(got, e.Index)
		}
		return got
	}
	before := read()
	mapped := procmem.MappedRSS(logstore.StateFileName)
	if mapped == 0 {
		t.Fatalf("no resident pages of %s after reading it", logstore.StateFileName)
	}
	if err := k.store.ReleaseMappedPages(); err != nil {
		t.Fatal(err)
	}
	t.Logf("mapped %d kB before the release, %d after", mapped, procmem.MappedRSS(logstore.StateFileName))
	if after := procmem.MappedRSS(logstore.StateFileName); after >= mapped {
		t.Fatalf("the state file's map keeps %d kB resident, %d before the release", after, mapped)
	}
	if again := read(); fmt.Sprint(again) != fmt.Sprint(before) || len(before) != 200 {
		t.Fatalf("the history after the release: %v, before: %v", again, before)
	}
}

// Persists may run at once (the fold loop's and another caller's): each
// writes what it took, none drops another's history terms, and the history
// finds every event.
func TestPersistConcurrently(t *testing.T) {
	k := openTest(t, t.TempDir())
	defer k.Close()
	ctx := context.Background()
	root := rootOf(t, k)
	const actions = 300
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if err := k.persist(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range actions {
		if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: fmt.Sprintf("persist/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := k.persist(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	q := HistoryQuery{Limit: 200, TargetPrefix: "persist/"}
	for {
		page, err := k.History(ctx, root, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			target := e.Event.Action.Target
			if seen[target] {
				t.Fatalf("%s listed twice", target)
			}
			seen[target] = true
		}
		if page.NextCursor == nil {
			break
		}
		q.Cursor = page.NextCursor
	}
	if len(seen) != actions {
		t.Fatalf("the history lists %d of %d actions", len(seen), actions)
	}
}
