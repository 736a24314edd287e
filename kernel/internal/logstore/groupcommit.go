package logstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/transparency-dev/tessera"
)

// groupCommitter makes entries durable in groups, one group in flight at a
// time: while a group is being written, new entries wait, and all of them
// are written together as soon as the write ends. A group costs one
// write-ahead fsync (writeahead.go) or, without the write-ahead log, one
// Tessera batch.
//
// Why, for Tessera: Tessera's queue cuts a batch when its first entry is maxAge old, even
// while the previous batch is still being written. Under load that makes
// many small batches, each paying the full cost of a POSIX write (new files,
// fsyncs). Arrivals over HTTP are spread out, so without grouping the kernel
// wrote batches a quarter the size raw Tessera did at the same concurrency.
// Grouping restores large batches under load and costs one maxAge when idle.
type groupCommitter struct {
	// write makes a group durable and says where each entry landed: through
	// Tessera (tesseraWriter) or the kernel's write-ahead log (writeahead.go).
	write func(group []*CommitRequest) []CommitResult
	// OnDurable, if set, sees each group once it is durable (all of it
	// sequenced) and before any of its callers hears back, with the
	// entries' outcomes; it may turn an outcome into an error, and may
	// answer (commitRequest.answer) the entries it is done with before it
	// returns; the rest are answered after. The kernel folds the group into
	// its ledger here, so an answer always reflects its own event.
	OnDurable func(group []*CommitRequest, results []CommitResult)
	// Seq, if set, sees each group before it is written and may keep
	// entries out of it (sequencer).
	Seq        Sequencer
	maxGroup   int
	maxPending int

	mu      sync.Mutex
	pending []*CommitRequest
	// unanswered counts the entries taken from pending and not yet
	// answered: being written, or written and waiting to be folded.
	unanswered int
	wake       chan struct{}
	stop       chan struct{}
	// durable takes each written group to the fold stage, in order, so
	// that the next group is written while this one is folded.
	durable chan durableGroup
	done    chan struct{} // both stages have stopped
}

type durableGroup struct {
	group   []*CommitRequest
	results []CommitResult
}

// Sequencer is the last check before the log: it sees every group in the
// order it will be written, and once written.
type Sequencer interface {
	// Admit returns the entries of group that may be written, in order,
	// and answers the others itself (they are written nowhere).
	Admit(group []*CommitRequest) []*CommitRequest
	// Written sees the outcome of writing what admit returned.
	Written(group []*CommitRequest, results []CommitResult)
}

type CommitRequest struct {
	entry []byte
	Event *event.Event // the decoded entry, for onDurable
	// At is the index the sequencer checked the entry At, which the
	// write must give it.
	At uint64
	// Folded, if set, is called by onDurable once the entry is Folded (or
	// failed), in the same critical section.
	Folded func()
	result chan CommitResult
	// answered is set once result has been sent: by the sequencer, for an
	// entry it keeps out of the log; else by onDurable, which may answer
	// the entries it has folded before the rest of their group, or by the
	// fold stage after it. One goroutine at a time touches it: the writer
	// until the group is written, the fold stage after.
	answered bool
}

// Answer sends res to the submitter, unless it has been answered.
func (r *CommitRequest) Answer(res CommitResult) {
	if !r.answered {
		r.answered = true
		r.result <- res
	}
}

type CommitResult struct {
	Index uint64
	Err   error
	// Written is when the write of the entry's group ended (zero for an
	// entry never written): the kernel's traces end the append stage and
	// start the fold there.
	Written time.Time
}

func newGroupCommitter(write func([]*CommitRequest) []CommitResult, maxGroup, maxPending int) *groupCommitter {
	g := &groupCommitter{
		write: write, maxGroup: maxGroup, maxPending: maxPending,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		durable: make(chan durableGroup),
	}
	go g.run()
	go g.foldStage()
	return g
}

// append queues entry and waits until it is durably sequenced.
func (g *groupCommitter) append(ctx context.Context, entry []byte, ev *event.Event, folded func()) CommitResult {
	r := &CommitRequest{entry: entry, Event: ev, Folded: folded, result: make(chan CommitResult, 1)}
	g.mu.Lock()
	if len(g.pending) >= g.maxPending {
		g.mu.Unlock()
		return CommitResult{Err: fmt.Errorf("%w: %d entries are waiting to be written", tessera.ErrPushback, len(g.pending))}
	}
	g.pending = append(g.pending, r)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	// Once queued, the entry will be written whatever the caller does, so
	// the caller waits for the outcome rather than for its own context:
	// answering "failed" for an entry that then lands would be a lie.
	return <-r.result
}

func (g *groupCommitter) run() {
	defer close(g.durable)
	for {
		select {
		case <-g.stop:
			g.drain()
			return
		case <-g.wake:
			g.drain()
		}
	}
}

// drain writes groups until nothing is pending, each handed to the fold
// stage once written.
func (g *groupCommitter) drain() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), g.maxGroup)
		group := g.pending[:n:n]
		g.pending = g.pending[n:]
		g.unanswered += n
		g.mu.Unlock()
		if n == 0 {
			return
		}
		if g.Seq != nil {
			group = g.Seq.Admit(group)
			if refused := n - len(group); refused > 0 {
				g.mu.Lock()
				g.unanswered -= refused
				g.mu.Unlock()
			}
			if len(group) == 0 {
				continue
			}
		}
		results := g.write(group)
		written := time.Now()
		for i := range results {
			results[i].Written = written
		}
		if g.Seq != nil {
			g.Seq.Written(group, results)
		}
		g.durable <- durableGroup{group: group, results: results}
	}
}

// foldStage folds each written group, in the order written, and answers
// its entries.
func (g *groupCommitter) foldStage() {
	defer close(g.done)
	for d := range g.durable {
		if g.OnDurable != nil {
			g.OnDurable(d.group, d.results)
		}
		for i, r := range d.group {
			r.Answer(d.results[i])
		}
		g.mu.Lock()
		g.unanswered -= len(d.group)
		g.mu.Unlock()
	}
}

// idle reports whether no entry is waiting, being written or being folded.
func (g *groupCommitter) idle() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending) == 0 && g.unanswered == 0
}

// abandon answers every entry not yet being written with err: they are
// not in the log and never will be. The group being written is not
// touched; its entries may land.
func (g *groupCommitter) abandon(err error) {
	g.mu.Lock()
	abandoned := g.pending
	g.pending = nil
	g.mu.Unlock()
	results := make([]CommitResult, len(abandoned))
	for i := range results {
		results[i].Err = err
	}
	if g.OnDurable != nil && len(abandoned) > 0 {
		g.OnDurable(abandoned, results)
	}
	for i, r := range abandoned {
		r.Answer(results[i])
	}
}

// tesseraWriter writes a group through Tessera's appender, which assigns
// the indices: all of it is handed over before any future is waited on, so
// that it can go out as one batch.
func tesseraWriter(add tessera.AddFn) func([]*CommitRequest) []CommitResult {
	return func(group []*CommitRequest) []CommitResult {
		futures := make([]tessera.IndexFuture, len(group))
		for i, r := range group {
			futures[i] = add(context.Background(), tessera.NewEntry(r.entry))
		}
		results := make([]CommitResult, len(group))
		for i, f := range futures {
			idx, err := f()
			results[i] = CommitResult{Index: idx.Index, Err: err}
		}
		return results
	}
}

// close writes what is pending and stops. Once ctx is done, entries not
// yet handed to Tessera are abandoned (answered with an error) rather than
// waited for.
// ErrUnavailable is the error of an entry abandoned because the log is
// stopping (the kernel's ErrUnavailable is this error).
var ErrUnavailable = errors.New("unavailable")

func (g *groupCommitter) close(ctx context.Context) {
	close(g.stop)
	select {
	case <-g.done:
	case <-ctx.Done():
		g.abandon(fmt.Errorf("%w: the kernel is stopping; the entry was not written", ErrUnavailable))
		<-g.done
	}
}
