package logstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// onDurable may answer the entries it is done with before it returns: the
// submitter hears back at once, and the fold stage answers only the rest,
// so every submitter is answered exactly once, with its own result. The
// first group goes to the fold stage because a second entry is pending
// when it is written (a lone entry is folded by its submitter).
func TestGroupCommitter_OnDurableAnswersEarly(t *testing.T) {
	var next uint64
	writing := make(chan struct{})
	unblock := make(chan struct{})
	write := func(group []*CommitRequest) []CommitResult {
		if next == 0 {
			close(writing)
			<-unblock
		}
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
		first := len(seen) == len(group)
		mu.Unlock()
		group[0].Answer(results[0])
		if first {
			<-release // only the first group waits
		}
	}
	ctx := context.Background()
	first := make(chan uint64, 1)
	go func() {
		res := g.append(ctx, []byte("first"), nil, nil)
		if res.Err != nil {
			t.Error(res.Err)
		}
		first <- res.Index
	}()
	<-writing
	second := make(chan CommitResult, 1)
	go func() { second <- g.append(ctx, []byte("second"), nil, nil) }()
	for {
		g.mu.Lock()
		queued := len(g.pending)
		g.mu.Unlock()
		if queued == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(unblock)
	select {
	case index := <-first:
		if index != 0 {
			t.Fatalf("first entry answered with index %d, want 0", index)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the entry onDurable answered was not answered before onDurable returned")
	}
	close(release)
	if res := <-second; res.Err != nil || res.Index != 1 {
		t.Fatalf("second entry: index %d, %v", res.Index, res.Err)
	}
	for i := range 4 {
		res := g.append(ctx, []byte("more"), nil, nil)
		index, err := res.Index, res.Err
		if err != nil || index != uint64(i+2) || res.Written.IsZero() {
			t.Fatalf("entry %d: index %d, written at %v, %v", i+2, index, res.Written, err)
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

// A submitter that finds nothing being written writes its own entry and,
// with nothing else pending or being folded, folds and answers it itself:
// a committer whose background writer and fold stage never run still
// answers a lone submitter, folded before the answer.
func TestGroupCommitter_LoneSubmitterWritesAndFolds(t *testing.T) {
	var next uint64
	write := func(group []*CommitRequest) []CommitResult {
		results := make([]CommitResult, len(group))
		for i := range results {
			results[i].Index = next
			next++
		}
		return results
	}
	// No goroutines: the background writer and the fold stage are absent.
	g := &groupCommitter{write: write, maxGroup: 64, maxPending: 1000,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), durable: make(chan durableGroup)}
	var folded []uint64
	g.OnDurable = func(group []*CommitRequest, results []CommitResult) {
		for _, r := range results {
			folded = append(folded, r.Index)
		}
	}
	for i := range 3 {
		res := g.append(context.Background(), []byte("lone"), nil, nil)
		if res.Err != nil || res.Index != uint64(i) {
			t.Fatalf("entry %d: index %d, %v", i, res.Index, res.Err)
		}
		if len(folded) != i+1 || folded[i] != uint64(i) {
			t.Fatalf("entry %d answered before it was folded: folded %v", i, folded)
		}
	}
	if !g.idle() {
		t.Fatal("the committer is not idle after answering every entry")
	}
}

// Whoever writes (leaders and the background writer, racing), groups are
// written one at a time and folded in the order written, and every
// submitter gets its own entry's index once.
func TestGroupCommitter_ConcurrentSubmittersFoldInOrder(t *testing.T) {
	var next uint64
	var inWrite sync.Mutex
	write := func(group []*CommitRequest) []CommitResult {
		if !inWrite.TryLock() {
			t.Error("two groups written at once")
			return make([]CommitResult, len(group))
		}
		defer inWrite.Unlock()
		results := make([]CommitResult, len(group))
		for i := range results {
			results[i].Index = next
			next++
		}
		time.Sleep(50 * time.Microsecond)
		return results
	}
	g := newGroupCommitter(write, 16, 100000)
	var mu sync.Mutex
	var folded uint64
	byEntry := map[string]uint64{}
	g.OnDurable = func(group []*CommitRequest, results []CommitResult) {
		mu.Lock()
		defer mu.Unlock()
		for i, r := range results {
			if r.Index != folded {
				t.Errorf("folded entry %d after %d entries: out of order", r.Index, folded)
			}
			folded++
			byEntry[string(group[i].entry)] = r.Index
		}
	}
	var wg sync.WaitGroup
	const submitters, each = 32, 50
	answers := make([]map[string]uint64, submitters)
	for s := range submitters {
		answers[s] = map[string]uint64{}
		wg.Go(func() {
			for i := range each {
				entry := fmt.Sprintf("%d/%d", s, i)
				res := g.append(context.Background(), []byte(entry), nil, nil)
				if res.Err != nil {
					t.Error(res.Err)
					return
				}
				answers[s][entry] = res.Index
			}
		})
	}
	wg.Wait()
	g.close(context.Background())
	if folded != submitters*each {
		t.Fatalf("folded %d entries, want %d", folded, submitters*each)
	}
	for _, a := range answers {
		for entry, index := range a {
			if byEntry[entry] != index {
				t.Fatalf("entry %s answered with index %d, folded at %d", entry, index, byEntry[entry])
			}
		}
	}
}
