package kernel

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/wal"
)

// The kernel's part of the commit stage (kernel/internal/logstore's group
// committer calls both): the sequencer, before a group is written, and the
// fold of each durable group into the ledger, after (foldDurable).
//
// The sequencer is the last check before the log, and the one that keeps
// it foldable.
//
// A decision is taken on the durable ledger less the energy decided events
// hold, and claims keep two events that do not commute out of flight
// together (decide.go, claims.go). That makes decisions fast and fair, but
// it rests on each rule naming what its event reads and changes: a claim a
// rule forgets lets a second event be decided on a state the first has
// already changed, and an entry the fold refuses would stop the kernel for
// good. So, right before a group is written, the sequencer folds each of
// its entries, in the order they will take in the log, into a ledger of its
// own that holds every entry before them — durable, or still being written
// — and keeps out of the log any entry that fold refuses. That entry is
// decided again once the durable ledger has folded what the sequencer had
// seen (decide), and its submitter gets that decision.
//
// The sequencing ledger runs as many entries ahead of the durable one as
// are being written. It is the durable ledger's copy (resetSequencer) when
// the kernel opens and after every resume, and follows the log only while
// every write lands where it was checked: once one fails, or lands at
// another index, it refuses everything (retryable, never written) and
// stops the kernel's writes until the resume loop has folded what the log
// holds and copied the durable ledger again.

// sequenceRefusal is an entry the sequencer kept out of the log.
type sequenceRefusal struct {
	// at is how many entries the sequencer had admitted before it: the
	// durable ledger has folded what the entry met once it is this large.
	at uint64
	// err is the fold's *ledger.FoldError, or why the sequencer no longer
	// follows the log (stale).
	err   error
	stale bool
}

func (r *sequenceRefusal) Error() string {
	if r.stale {
		return fmt.Sprintf("not written: %v", r.err)
	}
	return fmt.Sprintf("not written at %d: %v", r.at, r.err)
}

// Admit folds each entry of group, in order, into the sequencing ledger
// and returns those it folded; the others are answered with a
// *sequenceRefusal. It runs in the group committer's writer.
func (k *Kernel) Admit(group []*logstore.CommitRequest) []*logstore.CommitRequest {
	k.seqMu.Lock()
	defer k.seqMu.Unlock()
	kept := group[:0]
	for _, r := range group {
		if k.seqStale != nil {
			r.Answer(logstore.CommitResult{Err: &sequenceRefusal{err: k.seqStale, stale: true}})
			continue
		}
		at := k.seq.Size
		tolerated, err := k.seq.FoldReport(at, r.Event)
		if err != nil {
			if !k.cfg.claimsOff {
				// The claims let this entry be decided while an event it
				// does not commute with was in flight: in a test binary,
				// that is a claim a rule is missing.
				ledger.MissedClaim(fmt.Sprintf("entry %s (%s by %s) was decided on a state that an event in flight changed; at %d: %v",
					r.Event.ID, r.Event.Kind, r.Event.Actor, at, err))
			}
			k.seqRefusals.Add(1)
			k.logger.Warn("an entry decided on a state that changed before it was written was kept out of the log and is decided again",
				"index", at, "kind", r.Event.Kind, "actor", r.Event.Actor, "err", err)
			r.Answer(logstore.CommitResult{Err: &sequenceRefusal{at: at, err: err}})
			continue
		}
		r.At = at
		r.Checked = logstore.Checked{Gen: k.seqGen, Tolerated: len(tolerated) > 0}
		kept = append(kept, r)
	}
	return kept
}

// SequencerRefusals is how many entries the sequencer has kept out of the
// log since the kernel opened: decisions taken on a state that an event in
// flight had changed, each decided again. Any is a claim some rule misses
// (the decisions were right in the end, but waited).
func (k *Kernel) SequencerRefusals() uint64 { return k.seqRefusals.Load() }

// Written sees where the entries admit kept landed. An entry that failed,
// or landed elsewhere than it was checked at, leaves the sequencing ledger
// ahead of (or beside) the log: it stops following the log, and the
// kernel's writes stop until the resume loop copies the durable ledger
// again.
func (k *Kernel) Written(group []*logstore.CommitRequest, results []logstore.CommitResult) {
	var why error
	for i, r := range group {
		switch {
		case results[i].Err != nil:
			why = fmt.Errorf("the log failed to take entry %d: %w", r.At, results[i].Err)
		case results[i].Index != r.At:
			why = fmt.Errorf("an entry checked at index %d was written at %d", r.At, results[i].Index)
		default:
			continue
		}
		break
	}
	if why == nil {
		return
	}
	k.mu.Lock()
	k.seqMu.Lock()
	if k.seqStale == nil {
		k.seqStale = why
	}
	// Before the group is folded: none of its entries, nor any admitted
	// after it, is folded as checked (the log is not what was checked).
	k.seqGen++
	k.seqMu.Unlock()
	k.stopWriting(fmt.Errorf("sequencing: %w", why), true)
	k.mu.Unlock()
}

// resetSequencer makes the sequencing ledger a copy of the durable one.
// The caller holds k.mu, and the durable ledger has folded the whole log.
func (k *Kernel) resetSequencer() {
	seq := k.ledger.Clone()
	seq.Untracked()
	k.seqMu.Lock()
	k.seq, k.seqStale = seq, nil
	k.seqGen++
	k.seqMu.Unlock()
}

// maxRedecisions bounds how often one request is decided again after the
// sequencer kept its entry out: each time, it waits for the durable ledger
// to fold what the sequencer had seen, so another refusal needs another
// event, missing from the claims, to slip in between.
const maxRedecisions = 8

// awaitFolded waits until the durable ledger has folded size entries, or
// the kernel stops taking writes.
func (k *Kernel) awaitFolded(ctx context.Context, size uint64) error {
	for {
		k.mu.Lock()
		folded, grown, failed := k.ledger.Size, k.grown, k.failed
		k.mu.Unlock()
		switch {
		case folded >= size:
			return nil
		case failed != nil:
			return failed
		}
		select {
		case <-grown:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // a stop does not close grown
		}
	}
}

// redecision is what decide answers for a request whose entry the
// sequencer kept out: retryable, never written, naming the rule.
func redecision(stage string, refusal *sequenceRefusal, attempts int) *Denial {
	if refusal.stale {
		d := denyAt(stage, "", ErrUnavailable, "the entry was not written: %v; send it again", refusal.err)
		d.Retryable = true
		return d
	}
	d := denyAt(stage, "", ErrConflict, "decided %d times on a state that changed before the entry could be written, and not written: %v; send it again", attempts, refusal.err)
	var fe *ledger.FoldError
	if errors.As(refusal.err, &fe) {
		d.Gate = fe.Gate
	}
	d.Retryable = true
	return d
}

// foldDurable folds a durable group into the ledger, in log order, and
// answers each chunk's submitters once it is folded. It runs in the group
// committer's fold stage.
func (k *Kernel) foldDurable(group []*logstore.CommitRequest, results []logstore.CommitResult) {
	order := make([]int, len(group))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return results[order[a]].Index < results[order[b]].Index })
	for len(order) > 0 {
		n := min(len(order), foldChunk)
		k.foldInOrder(group, results, order[:n])
		for _, i := range order[:n] {
			group[i].Answer(results[i])
		}
		order = order[n:]
	}
}

// foldChunk is how many entries of a group are folded in one hold of the
// kernel's lock. Why: folding an entry holds the lock about 10 µs (measured
// with 512 agents), so a full group of 512 would hold every decision back
// for some 5 ms; between chunks decisions go on against the ledger as it
// stands, with what is not yet folded still held (its claims and energy).
// A chunk's submitters are answered as soon as it is folded, so that they
// come back while the rest is folded rather than all at once after it.
const foldChunk = 64

// foldInOrder folds the entries of group at order, in that order, in one
// critical section.
func (k *Kernel) foldInOrder(group []*logstore.CommitRequest, results []logstore.CommitResult, order []int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.signalGrowth(k.ledger.Size)
	for _, i := range order {
		r := &results[i]
		switch {
		case r.Err != nil:
			// Tessera may fail after an entry became durable (its tree
			// state renamed into place, the folder's fsync then failing):
			// nothing more is decided until the ledger has folded what the
			// log holds, which the resume loop does. A write-ahead log
			// that could not cut a failed write back holds what only a
			// restart can tell.
			k.stopWriting(fmt.Errorf("the log failed to take an entry: %w", r.Err), !errors.Is(r.Err, wal.ErrBroken))
		case r.Index != k.ledger.Size:
			// Durable, but behind an entry this kernel was told had failed
			// and which landed after all (or one already folded by a
			// resume): the answer is the truth, the entry is in the log at
			// r.index; the resume loop folds it in order.
			if r.Index > k.ledger.Size {
				k.stopWriting(fmt.Errorf("entry %d landed after an append that was reported failed", r.Index), true)
			}
		default:
			if err := k.foldOne(group[i], r.Index); err != nil {
				r.Err = err
				k.stopWriting(fmt.Errorf("durable entry %d cannot be folded: %w (run annald audit)", r.Index, err), false)
			} else {
				k.indexFolded(r.Index, group[i].Event)
			}
		}
		// Claims and held energy go in the same critical section as the
		// fold, so the next decision sees the event's effect, not its hold.
		if f := group[i].Folded; f != nil {
			f()
		}
	}
}

// foldOne folds the durable entry of c at index (the ledger's size; the
// caller holds k.mu). The sequencer checked it right before it was written
// (Admit), on its ledger: a copy of this one (resetSequencer) that has
// folded, since, exactly the entries this one folds before it, if its
// check was of this index and seqGen has not moved. seqGen moves with
// every copy, and in Written, before the group is folded, once any entry
// failed or landed elsewhere than it was checked at (and then the
// sequencer admits nothing until the next copy). The rule is a pure
// function of the ledger and the event, so the entry's check is not run
// again: ledger.FoldChecked (which runs it anyway in test binaries, and
// panics if the ledgers differed). Anything else is folded with its check.
func (k *Kernel) foldOne(c *logstore.CommitRequest, index uint64) error {
	if c.Checked.Gen != 0 && c.Checked.Gen == k.seqGen && c.At == index {
		return k.ledger.FoldChecked(index, c.Event, c.Checked.Tolerated)
	}
	return k.ledger.Fold(index, c.Event)
}

// signalGrowth wakes Grown's waiters if the ledger folded past before
// (the caller holds k.mu).
func (k *Kernel) signalGrowth(before uint64) {
	if k.ledger.Size != before {
		close(k.grown)
		k.grown = make(chan struct{})
	}
}

// Grown returns the ledger's folded size and a channel closed once it
// folds more: a live tail waits on it instead of polling.
func (k *Kernel) Grown() (uint64, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ledger.Size, k.grown
}
