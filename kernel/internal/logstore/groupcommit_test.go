package logstore

import (
	"context"
	"sync"
	"testing"
	"time"
)

// onDurable may answer the entries it is done with before it returns: the
// submitter hears back at once, and the fold stage answers only the rest,
// so every submitter is answered exactly once, with its own result.
func TestGroupCommitter_OnDurableAnswersEarly(t *testing.T) {
	var next uint64
	write := func(group []*CommitRequest) []CommitResult {
		results := make([]CommitResult, len(group))
		for i := range results {
			results[i].Index = next
			next++
		}
		return results
	}
	g := newGroupCommitter(write, 64, 1000)
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []*CommitRequest
	g.OnDurable = func(group []*CommitRequest, results []CommitResult) {
		mu.Lock()
		seen = append(seen, group...)
		mu.Unlock()
		group[0].Answer(results[0])
		<-release // only the first group waits
	}
	ctx := context.Background()
	first := make(chan uint64, 1)
	go func() {
		res := g.append(ctx, []byte("first"), nil, nil)
		index, err := res.Index, res.Err
		if err != nil {
			t.Error(err)
		}
		first <- index
	}()
	select {
	case index := <-first:
		if index != 0 {
			t.Fatalf("first entry answered with index %d, want 0", index)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the entry onDurable answered was not answered before onDurable returned")
	}
	close(release)
	for i := range 5 {
		res := g.append(ctx, []byte("more"), nil, nil)
		index, err := res.Index, res.Err
		if err != nil || index != uint64(i+1) || res.Written.IsZero() {
			t.Fatalf("entry %d: index %d, written at %v, %v", i+1, index, res.Written, err)
		}
	}
	g.close(ctx)
	if len(seen) != 6 {
		t.Fatalf("onDurable saw %d entries, want 6", len(seen))
	}
	for i, r := range seen {
		if !r.answered || len(r.result) != 0 {
			t.Fatalf("entry %d: answered %v, %d answers left unread (answered twice)", i, r.answered, len(r.result))
		}
	}
}
