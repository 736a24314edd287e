package verifier

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"runtime"
	"sync"

	"github.com/annal-dev/annal/format/bundle"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// The event lines of a bundle stream through three stages: one goroutine
// reads batches of lines, one checks each batch on the workers (parsing,
// leaf hashes, proofs, the compact range of each worker's run), and the
// caller merges the checked batches in order (index order, selection,
// counts, the range, the delta chains).

// A batch is a run of consecutive event lines, checked in parallel and
// then merged in order.
type batch struct {
	firstLine int
	buf       []byte // the lines' bytes
	ends      []int  // end offset of each line in buf
	results   []lineResult
	// chunks are the runs of lines each worker checked and, for a range
	// bundle, the compact range of their leaves (nil if the run's indices
	// are not consecutive or a line failed: mergeBatch then reports why).
	chunks  []chunk
	trailer []byte // set on the batch that ends with the trailer
	err     error  // a read error after the batch's lines
}

type chunk struct {
	end int // one past the chunk's last line in the batch
	rng *compact.Range
}

type lineResult struct {
	index uint64
	ev    *Event
	leaf  [sha256.Size]byte
	delta *DeltaLink
	sign  *signingFacts
	seal  *sealedFacts
	// opened: the line opened the sealed payload (and it matched).
	opened bool
	// keyEvent: a key_event line, carried for the signatures.
	keyEvent bool
	err      *Error
}

const (
	batchLines = 4096
	batchBytes = 4 << 20
)

// events reads the event lines and the trailer. Three stages overlap: one
// goroutine reads batches of lines, one checks each batch on the workers,
// and this one merges the checked batches in order.
func (v *bundleVerifier) events() error {
	workers := v.opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	read := make(chan *batch, 2)
	checked := make(chan *batch, 2)
	free := make(chan *batch, 6)
	stop := make(chan struct{})
	defer close(stop)
	go v.readBatches(read, free, stop)
	go func() {
		defer close(checked)
		for b := range read {
			v.checkBatch(b, workers)
			select {
			case checked <- b:
			case <-stop:
				return
			}
		}
	}()
	var lastProgress uint64
	for b := range checked {
		if err := v.mergeBatch(b); err != nil {
			return err
		}
		if b.err != nil {
			return b.err
		}
		if b.trailer != nil {
			return v.trailer(b.trailer)
		}
		if v.opts.Progress != nil && v.res.Events-lastProgress >= 1<<16 {
			v.opts.Progress(v.res.Events)
			lastProgress = v.res.Events
		}
		select {
		case free <- b:
		default:
		}
	}
	return fail(CheckBundle, "the bundle ends after line %d without its trailer: it is truncated", v.line)
}

// readBatches runs on its own goroutine, so reading overlaps hashing.
func (v *bundleVerifier) readBatches(out chan<- *batch, free <-chan *batch, stop <-chan struct{}) {
	defer close(out)
	for {
		b := nextBatch(free)
		v.fill(b)
		if len(b.ends) == 0 && b.trailer == nil && b.err == nil {
			return // end of input
		}
		select {
		case out <- b:
		case <-stop:
			return
		}
		if b.trailer != nil || b.err != nil {
			return
		}
	}
}

// nextBatch is a merged batch handed back, emptied, or a new one.
func nextBatch(free <-chan *batch) *batch {
	select {
	case b := <-free:
		b.buf, b.ends, b.results, b.trailer, b.err = b.buf[:0], b.ends[:0], b.results[:0], nil, nil
		return b
	default:
		// A batch's buffers are sized once: growing them line by line
		// was a fifth of the time of a small bundle.
		return &batch{buf: make([]byte, 0, batchBytes+bundle.MaxLineSize), ends: make([]int, 0, batchLines)}
	}
}

// fill reads lines into b until it is full, or up to the trailer, the end
// of the input or a read error.
func (v *bundleVerifier) fill(b *batch) {
	b.firstLine = v.line + 1
	for len(b.ends) < batchLines && len(b.buf) < batchBytes {
		line, err := v.readLine()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			b.err = err
			return
		}
		if bytes.HasPrefix(line, trailerPrefix) {
			b.trailer = bytes.Clone(line)
			b.err = v.afterTrailer()
			return
		}
		b.buf = append(b.buf, line...)
		b.ends = append(b.ends, len(b.buf))
	}
}

// afterTrailer reads past the trailer: the bundle must end there.
func (v *bundleVerifier) afterTrailer() error {
	_, err := v.readLine()
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err
	}
	return fail(CheckBundle, "line %d comes after the trailer", v.line)
}

// checkBatch parses, hashes and proves each line of a batch on workers
// goroutines; everything that needs order is left to mergeBatch.
func (v *bundleVerifier) checkBatch(b *batch, workers int) {
	n := len(b.ends)
	if cap(b.results) < n {
		b.results = make([]lineResult, n)
	}
	b.results = b.results[:n]
	if n == 0 {
		return
	}
	per := (n + workers - 1) / workers
	b.chunks = b.chunks[:0]
	for w := 0; w*per < n; w++ {
		b.chunks = append(b.chunks, chunk{end: min(n, (w+1)*per)})
	}
	var wg sync.WaitGroup
	for w := range b.chunks {
		from, to := w*per, b.chunks[w].end
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := from; i < to; i++ {
				start := 0
				if i > 0 {
					start = b.ends[i-1]
				}
				b.results[i], buf = v.checkLine(b.firstLine+i, b.buf[start:b.ends[i]], buf)
			}
			if v.factory != nil {
				b.chunks[w].rng = v.chunkRange(b.results[from:to])
			}
		}()
	}
	wg.Wait()
}

// checkLine checks what one event line shows on its own. buf is scratch
// space it may reuse, returned for the next line.
func (v *bundleVerifier) checkLine(lineNo int, line, buf []byte) (lineResult, []byte) {
	r, buf := v.checkLineInto(lineNo, line, buf)
	if r.ev != nil {
		r.ev.delta = nil // it points into buf; CheckDeltaEvent has read it
	}
	return r, buf
}

func (v *bundleVerifier) checkLineInto(lineNo int, line, buf []byte) (r lineResult, _ []byte) {
	e, buf, err := parseEventLine(line, v.withProof, buf)
	if err != nil {
		r.err = fail(CheckBundle, "line %d: %v", lineNo, err)
		return r, buf
	}
	r.index = e.index
	if e.index >= v.res.Size {
		r.err = fail(CheckIndex, "line %d: index %d is not inside the checkpoint's %d entries", lineNo, e.index, v.res.Size)
		return r, buf
	}
	if r.ev, err = ParseEvent(e.entry); err != nil {
		r.err = fail(CheckEntry, "line %d: entry %d: %v", lineNo, e.index, err)
		return r, buf
	}
	if r.sign, err = readSigning(r.ev.Kind, e.entry); err != nil {
		r.err = fail(CheckEntry, "line %d: entry %d: %v", lineNo, e.index, err)
		return r, buf
	}
	if r.seal, err = readSealed(r.ev.Kind, e.entry); err != nil {
		r.err = fail(CheckEntry, "line %d: entry %d: %v", lineNo, e.index, err)
		return r, buf
	}
	if r.keyEvent = e.keyEvent; r.keyEvent && (r.sign == nil || !r.sign.keyChange) {
		r.err = fail(CheckBundle, "line %d: entry %d is a %s, not a key event (actor.key, or actor.created with a signing_key)", lineNo, e.index, r.ev.Kind)
		return r, buf
	}
	if e.opened != nil {
		if err := checkOpening(r.seal, e.opened); err != nil {
			r.err = fail(CheckSealed, "line %d: entry %d: %v", lineNo, e.index, err)
			return r, buf
		}
		r.opened = true
	}
	r.leaf = sha256.Sum256(buf[:1+len(e.entry)]) // the prefix byte, then the entry
	if v.withProof {
		if err := proof.VerifyInclusion(hasher, e.index, v.res.Size, r.leaf[:], e.proof, v.res.RootHash[:]); err != nil {
			r.err = fail(CheckInclusion, "line %d: entry %d (leaf hash %x) is not at index %d of %s size %d: %v",
				lineNo, e.index, r.leaf, e.index, v.res.Origin, v.res.Size, describe(err))
			return r, buf
		}
	}
	if r.ev.Kind == DeltaKind {
		if r.delta, err = CheckDeltaEvent(r.ev); err != nil {
			r.err = fail(CheckDelta, "line %d: entry %d: %v", lineNo, e.index, err)
		}
	}
	return r, buf
}

// chunkRange is the compact range of a run of consecutive leaves, hashed
// on a worker so that merging costs O(log n) per chunk; nil if the run
// holds a failed line or a gap.
func (v *bundleVerifier) chunkRange(results []lineResult) *compact.Range {
	if len(results) == 0 || results[0].err != nil {
		return nil
	}
	r := v.factory.NewEmptyRange(results[0].index)
	for i := range results {
		if results[i].err != nil || results[i].index != r.End() {
			return nil
		}
		if err := r.Append(results[i].leaf[:], nil); err != nil {
			return nil
		}
	}
	return r
}

// mergeBatch applies a checked batch in order: index order, selection,
// counts, the compact range, the delta chains.
func (v *bundleVerifier) mergeBatch(b *batch) error {
	c := 0 // the chunk of line i
	for i := range b.results {
		r := &b.results[i]
		if i == b.chunks[c].end {
			c++
		}
		lineNo := b.firstLine + i
		var err error
		switch {
		case r.err != nil:
			return r.err
		case r.keyEvent:
			err = v.mergeKeyEvent(lineNo, r)
		default:
			err = v.mergeEvent(lineNo, r, b.chunks[c], i == b.chunks[c].end-1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// mergeKeyEvent applies a key_event line. Proven by its own path
// (checkLine), it is applied to the keys, counted apart, and not matched
// with the selection.
func (v *bundleVerifier) mergeKeyEvent(lineNo int, r *lineResult) error {
	if r.index < v.lineAfter {
		return fail(CheckBundle, "line %d: index %d is not above the previous line's %d", lineNo, r.index, v.lineAfter-1)
	}
	v.lineAfter = r.index + 1
	if err := v.signature(lineNo, r); err != nil {
		return err
	}
	v.res.KeyEvents++
	return nil
}

// mergeEvent applies an event line, the last of its chunk or not.
func (v *bundleVerifier) mergeEvent(lineNo int, r *lineResult, ch chunk, lastOfChunk bool) error {
	if err := v.inOrder(lineNo, r.index); err != nil {
		return err
	}
	v.lineAfter = r.index + 1
	if why := v.sel.match(r.index, r.ev); why != "" {
		return fail(CheckSelection, "line %d: entry %d does not match the bundle's selection: %s", lineNo, r.index, why)
	}
	if err := v.extendRange(lineNo, r, ch, lastOfChunk); err != nil {
		return err
	}
	if err := v.signature(lineNo, r); err != nil {
		return err
	}
	if r.seal != nil {
		v.res.Sealed.count(r.seal.subject, r.opened)
	}
	if r.delta != nil {
		if err := v.chains.add(r.index, r.delta); err != nil {
			return fail(CheckDelta, "line %d: %v", lineNo, err)
		}
	}
	v.res.tally(r.index, r.ev)
	v.next = r.index + 1
	return nil
}

// inOrder checks an event's index against the lines before it: every
// index in order for a range bundle, increasing indices from the
// selection's from otherwise.
func (v *bundleVerifier) inOrder(lineNo int, index uint64) error {
	switch {
	case v.rng != nil && index != v.next:
		return fail(CheckBundle, "line %d: index %d is not %d: a range bundle holds every index in order", lineNo, index, v.next)
	case index < v.next:
		if v.res.Events > 0 {
			return fail(CheckBundle, "line %d: index %d is not above the previous event's %d", lineNo, index, v.res.LastIndex)
		}
		return fail(CheckSelection, "line %d: index %d is below the selection's from %d", lineNo, index, v.next)
	case index < v.lineAfter:
		return fail(CheckBundle, "line %d: index %d is not above the previous line's %d", lineNo, index, v.lineAfter-1)
	}
	return nil
}

// extendRange adds an event's leaf to a range bundle's compact range: its
// chunk's range, hashed on the worker, once the chunk's last line is in.
func (v *bundleVerifier) extendRange(lineNo int, r *lineResult, ch chunk, lastOfChunk bool) error {
	if v.rng == nil {
		return nil
	}
	var err error
	switch {
	case ch.rng == nil: // cannot happen once the checks above passed
		err = v.rng.Append(r.leaf[:], nil)
	case lastOfChunk:
		err = v.rng.AppendRange(ch.rng, nil)
	}
	if err != nil {
		return fail(CheckInclusion, "line %d: %v", lineNo, err)
	}
	return nil
}

// signature hands a line's event to the signature state, in index order.
func (v *bundleVerifier) signature(lineNo int, r *lineResult) error {
	if err := v.sigs.event(r.index, r.ev, r.sign); err != nil {
		return fail(CheckSignature, "line %d: entry %d (%s by %s): %v", lineNo, r.index, r.ev.Kind, r.ev.Actor, err)
	}
	return nil
}

// tally counts a verified event in the result.
func (res *BundleResult) tally(index uint64, ev *Event) {
	if res.Events == 0 {
		res.FirstIndex, res.FirstTime, res.LastTime = index, ev.Time, ev.Time
	}
	res.Events++
	res.LastIndex = index
	if ev.Time.Before(res.FirstTime) {
		res.FirstTime = ev.Time
	}
	if ev.Time.After(res.LastTime) {
		res.LastTime = ev.Time
	}
	res.ByActor[ev.Actor]++
	res.ByKind[ev.Kind]++
	if ev.Type != "" {
		res.ByActionType[ev.Type]++
	}
}
