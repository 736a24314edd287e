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
//
// Who writes: a submitter that finds the committer idle (nothing being
// written, folded or answered) writes its own group itself (lead), and,
// when nothing else is pending or being folded and the group is small,
// folds and answers it too; everything else is written by the background
// writer (run) and folded by the fold stage. Why:
// at low load each handoff between goroutines (submitter to writer, writer
// to fold stage, fold stage back to the submitter) wakes a parked thread,
// tens of microseconds each on a receipt whose fsync takes about 150; a
// submitter that does the work itself answers after the fsync and the
// fold alone. Under load a group is large and the handoffs are shared by
// all of it, so the stages stay as they were: one group written while the
// one before is folded. (A submitter that led whenever no group was being
// written wrote groups of one between the writer's under load: twice the
// fsyncs, and more CPU an entry.) Either way one goroutine writes at a time
// (writing), groups are folded in the order they were written, and a
// leader writes one group only, so it is not kept from its own answer.
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
	// writing is set while a goroutine holds the writer's role: the
	// background writer, or a submitter that leads (lead).
	writing bool
	// stopping is set once close began: no submitter leads from then on.
	stopping bool
	// folding counts the groups handed to the fold stage and not yet
	// folded: a writer folds a group itself only when it is 0, so that
	// groups are folded in the order written.
	folding int
	wake    chan struct{}
	stop    chan struct{}
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
	// Checked is set by the sequencer to what its check of the entry at At
	// found, for onDurable (the kernel's commit.go says what it holds).
	Checked Checked
	result  chan CommitResult
	// answered is set once result has been sent: by the sequencer, for an
	// entry it keeps out of the log; else by onDurable, which may answer
	// the entries it has folded before the rest of their group, or by the
	// fold after it. One goroutine at a time touches it: the writer until
	// the group is written, then whoever folds it (the fold stage, or the
	// writer itself).
	answered bool
}

// Answer sends res to the submitter, unless it has been answered.
func (r *CommitRequest) Answer(res CommitResult) {
	if !r.answered {
		r.answered = true
		r.result <- res
	}
}

// Checked is the sequencer's check of an entry: Gen names the state it
// was checked on (0: not checked), Tolerated says whether the check passed
// over a violation of a rule the log had not adopted.
type Checked struct {
	Gen       uint64
	Tolerated bool
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
	lead := !g.writing && !g.stopping && g.unanswered == 0
	g.writing = g.writing || lead
	g.mu.Unlock()
	if lead {
		g.lead()
	} else {
		g.wakeWriter()
	}
	// Once queued, the entry will be written whatever the caller does, so
	// the caller waits for the outcome rather than for its own context:
	// answering "failed" for an entry that then lands would be a lie.
	return <-r.result
}

// lead writes the next group (the leader's own entry, and any queued
// with it) as the writer, and gives the role back: to the background
// writer if more is pending (or close waits for it). The caller holds the
// role (writing).
func (g *groupCommitter) lead() {
	g.writeNext()
	g.mu.Lock()
	g.writing = false
	more := len(g.pending) > 0 || g.stopping
	g.mu.Unlock()
	if more {
		g.wakeWriter()
	}
}

func (g *groupCommitter) wakeWriter() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// takeWriter takes the writer's role for the background writer, unless
// a leader holds it (it wakes the writer once it gives the role back).
func (g *groupCommitter) takeWriter(stopping bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopping = g.stopping || stopping
	if g.writing {
		return false
	}
	g.writing = true
	return true
}

func (g *groupCommitter) run() {
	defer close(g.durable)
	for {
		select {
		case <-g.stop:
			for !g.takeWriter(true) {
				<-g.wake // the leader wakes the writer when it is done
			}
			g.drain()
			return
		case <-g.wake:
			if g.takeWriter(false) {
				g.drain()
			}
		}
	}
}

// drain writes groups until nothing is pending, then gives the writer's
// role back. An entry queued meanwhile found the role taken and woke the
// writer, which drains again.
func (g *groupCommitter) drain() {
	for g.writeNext() {
	}
	g.mu.Lock()
	g.writing = false
	g.mu.Unlock()
}

// maxInlineFold is the largest group a writer folds itself rather than
// handing it to the fold stage (when nothing else is pending or being
// folded): the groups of a lightly loaded kernel, whose fold is short.
const maxInlineFold = 8

// writeNext writes the next group of pending entries, if any (false if
// none), and folds it itself or hands it to the fold stage. The caller
// holds the writer's role.
func (g *groupCommitter) writeNext() bool {
	g.mu.Lock()
	n := min(len(g.pending), g.maxGroup)
	group := g.pending[:n:n]
	g.pending = g.pending[n:]
	g.unanswered += n
	g.mu.Unlock()
	if n == 0 {
		return false
	}
	if g.Seq != nil {
		group = g.Seq.Admit(group)
		if refused := n - len(group); refused > 0 {
			g.mu.Lock()
			g.unanswered -= refused
			g.mu.Unlock()
		}
		if len(group) == 0 {
			return true
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
	d := durableGroup{group: group, results: results}
	g.mu.Lock()
	inline := g.folding == 0 && len(g.pending) == 0 && len(group) <= maxInlineFold
	if !inline {
		g.folding++
	}
	g.mu.Unlock()
	if inline {
		g.fold(d)
	} else {
		g.durable <- d
	}
	return true
}

// foldStage folds each written group handed to it, in the order written,
// and answers its entries.
func (g *groupCommitter) foldStage() {
	defer close(g.done)
	for d := range g.durable {
		g.fold(d)
		g.mu.Lock()
		g.folding--
		g.mu.Unlock()
	}
}

// fold folds a written group (OnDurable) and answers its entries.
func (g *groupCommitter) fold(d durableGroup) {
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
