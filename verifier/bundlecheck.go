package verifier

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// BundleOptions tune VerifyBundle; the zero value is ready to use.
type BundleOptions struct {
	// OldCheckpoint, if set, is a signed checkpoint of the same log that the
	// auditor already holds: the bundle MUST carry a consistency proof from
	// its size, and the proof's old root MUST be its root.
	OldCheckpoint []byte
	// Workers is how many goroutines parse and hash events (default
	// GOMAXPROCS).
	Workers int
	// Progress, if set, is called with the number of events verified so
	// far, from the calling goroutine, about every 64K events.
	Progress func(events uint64)
}

// BundleResult is what a verified bundle establishes: every event in it is
// the entry at its index in the log Origin of Size entries, whose
// checkpoint the log key signed and the policy's quorum cosigned.
type BundleResult struct {
	Origin     string
	Size       uint64
	RootHash   [sha256.Size]byte
	LogKey     string
	Cosigners  []string
	Checkpoint *checkpoints.SignedCheckpoint
	Proof      string // BundleRange or BundleInclusion
	Selection  BundleSelection
	Events     uint64
	// FirstIndex and LastIndex of the events; FirstTime and LastTime, the
	// earliest and latest event times.
	FirstIndex, LastIndex uint64
	FirstTime, LastTime   time.Time
	ByActor               map[string]uint64
	ByKind                map[string]uint64
	ByActionType          map[string]uint64
	// Sessions are the delta chains in the bundle, in order of first delta.
	Sessions []SessionChain
	// OldSize and OldRoot, when the bundle proves consistency with an older
	// tree.
	OldSize uint64
	OldRoot [sha256.Size]byte
}

var hasher = rfc6962.DefaultHasher

// VerifyBundle reads an audit bundle (testvectors/FORMATS.md, "Audit
// bundles") from r and checks it under the policy: the header, the
// checkpoint's log signature and cosignature quorum, the consistency proof
// if any, every event line (layout, index order, the event's encoding, its
// match with the selection), every event's inclusion (one compact-range
// proof for a range bundle, one inclusion proof per event otherwise), the
// delta chains of every session, and the trailer. It reads r once, holding
// a bounded number of lines at a time, hashes on opts.Workers goroutines,
// and returns the first failure as a *Error naming the line and the check.
func VerifyBundle(r io.Reader, p *Policy, opts *BundleOptions) (*BundleResult, error) {
	if opts == nil {
		opts = &BundleOptions{}
	}
	v := &bundleVerifier{p: p, opts: opts, in: bufio.NewReaderSize(r, MaxBundleLineSize+1)}
	return v.run()
}

type bundleVerifier struct {
	p    *Policy
	opts *BundleOptions
	in   *bufio.Reader
	line int // lines read so far

	h         BundleHeader
	res       *BundleResult
	factory   *compact.RangeFactory
	rng       *compact.Range
	right     *compact.Range
	next      uint64 // the smallest index the next event may have
	chains    chains
	withProof bool
}

// readLine returns the next line without its LF, or io.EOF at the end.
func (v *bundleVerifier) readLine() ([]byte, error) {
	line, err := v.in.ReadSlice('\n')
	switch {
	case err == nil:
		v.line++
		return line[:len(line)-1], nil
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fail(CheckBundle, "line %d is longer than %d bytes", v.line+1, MaxBundleLineSize)
	case errors.Is(err, io.EOF) && len(line) == 0:
		return nil, io.EOF
	case errors.Is(err, io.EOF):
		return nil, fail(CheckBundle, "line %d does not end with a newline: the bundle is truncated", v.line+1)
	}
	return nil, fail(CheckBundle, "reading line %d: %v", v.line+1, err)
}

func (v *bundleVerifier) run() (*BundleResult, error) {
	line, err := v.readLine()
	if errors.Is(err, io.EOF) {
		return nil, fail(CheckBundle, "the bundle is empty")
	} else if err != nil {
		return nil, err
	}
	if err := v.header(line); err != nil {
		return nil, err
	}
	if err := v.events(); err != nil {
		return nil, err
	}
	return v.finish()
}

// header parses and checks line 1 and opens the checkpoint.
func (v *bundleVerifier) header(line []byte) error {
	if err := parseJSONLine(line, &v.h); err != nil {
		return fail(CheckBundle, "line 1 (header): %v", err)
	}
	h := &v.h
	if h.Bundle != BundleFormat {
		return fail(CheckBundle, "line 1: bundle format %q is not %q", abbreviate(h.Bundle), BundleFormat)
	}
	if err := h.Selection.check(); err != nil {
		return fail(CheckBundle, "line 1: %v", err)
	}
	pr, err := v.p.OpenCheckpoint([]byte(h.Checkpoint))
	if err != nil {
		return err
	}
	cp := pr.Checkpoint
	v.res = &BundleResult{
		Origin: cp.Origin, Size: cp.Size, RootHash: cp.Hash, LogKey: pr.LogKey, Cosigners: pr.Cosigners,
		Checkpoint: cp, Proof: h.Proof, Selection: h.Selection,
		ByActor: map[string]uint64{}, ByKind: map[string]uint64{}, ByActionType: map[string]uint64{},
	}
	if cp.Size == 0 {
		return fail(CheckIndex, "the checkpoint has no entries")
	}
	sel := &h.Selection
	switch h.Proof {
	case BundleRange:
		if sel.From == nil || sel.To == nil || sel.filtered() {
			return fail(CheckBundle, "line 1: a range bundle's selection is exactly from and to")
		}
		if *sel.To > cp.Size {
			return fail(CheckIndex, "range [%d, %d) is not inside the checkpoint's %d entries", *sel.From, *sel.To, cp.Size)
		}
		f := &compact.RangeFactory{Hash: hasher.HashChildren}
		v.factory = f
		left, err := parseHashList("left", h.Left)
		if err != nil {
			return fail(CheckBundle, "line 1: %v", err)
		}
		right, err := parseHashList("right", h.Right)
		if err != nil {
			return fail(CheckBundle, "line 1: %v", err)
		}
		if v.rng, err = f.NewRange(0, *sel.From, left); err != nil {
			return fail(CheckBundle, "line 1: left has %d hashes, the compact range of [0, %d) has %d", len(left), *sel.From, compact.RangeSize(0, *sel.From))
		}
		if v.right, err = f.NewRange(*sel.To, cp.Size, right); err != nil {
			return fail(CheckBundle, "line 1: right has %d hashes, the compact range of [%d, %d) has %d", len(right), *sel.To, cp.Size, compact.RangeSize(*sel.To, cp.Size))
		}
		v.next = *sel.From
	case BundleInclusion:
		if len(h.Left) > 0 || len(h.Right) > 0 {
			return fail(CheckBundle, "line 1: an inclusion bundle has no left or right hashes")
		}
		v.withProof = true
		if sel.From != nil {
			v.next = *sel.From
		}
	default:
		return fail(CheckBundle, "line 1: proof %q is neither %q nor %q", abbreviate(h.Proof), BundleRange, BundleInclusion)
	}
	return v.consistency(cp)
}

func (v *bundleVerifier) consistency(cp *checkpoints.SignedCheckpoint) error {
	c := v.h.Consistency
	if c == nil {
		if v.opts.OldCheckpoint != nil {
			return fail(CheckConsistency, "an old checkpoint was given but the bundle carries no consistency proof")
		}
		return nil
	}
	oldRoot, err := checkpoints.ParseHash(c.OldRoot)
	if err != nil {
		return fail(CheckBundle, "line 1: consistency old_root: %v", err)
	}
	hashes, err := parseHashList("consistency proof", c.Proof)
	if err != nil {
		return fail(CheckBundle, "line 1: %v", err)
	}
	switch {
	case c.OldSize == 0:
		return fail(CheckBundle, "line 1: consistency old_size is 0: there is nothing to prove")
	case c.OldSize > cp.Size:
		return fail(CheckConsistency, "old size %d is larger than the checkpoint's %d", c.OldSize, cp.Size)
	}
	if err := proof.VerifyConsistency(hasher, c.OldSize, cp.Size, hashes, oldRoot[:], cp.Hash[:]); err != nil {
		return fail(CheckConsistency, "the tree of %d entries with root %s is not a prefix of the checkpoint's: %v", c.OldSize, c.OldRoot, describe(err))
	}
	v.res.OldSize, v.res.OldRoot = c.OldSize, oldRoot
	if v.opts.OldCheckpoint != nil {
		logKey, _ := v.p.LogKey(cp.Origin)
		lv, err := LogVerifier(logKey)
		if err != nil {
			return err
		}
		old, err := checkpoints.OpenCheckpoint(v.opts.OldCheckpoint, lv)
		if err != nil {
			return wrap(CheckCheckpoint, fmt.Errorf("old checkpoint: %w", err))
		}
		if old.Size != c.OldSize || old.Hash != oldRoot {
			return fail(CheckConsistency, "the old checkpoint has size %d and root %s; the bundle proves consistency from size %d, root %s",
				old.Size, b64(old.Hash[:]), c.OldSize, c.OldRoot)
		}
	}
	return nil
}

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
	err   *Error
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
		var b *batch
		select {
		case b = <-free:
			b.buf, b.ends, b.results, b.trailer, b.err = b.buf[:0], b.ends[:0], b.results[:0], nil, nil
		default:
			b = &batch{}
		}
		b.firstLine = v.line + 1
		for len(b.ends) < batchLines && len(b.buf) < batchBytes {
			line, err := v.readLine()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.err = err
				break
			}
			if bytes.HasPrefix(line, trailerPrefix) {
				b.trailer = bytes.Clone(line)
				if _, err := v.readLine(); !errors.Is(err, io.EOF) {
					b.err = fail(CheckBundle, "line %d comes after the trailer", v.line)
					if err != nil {
						b.err = err
					}
				}
				break
			}
			b.buf = append(b.buf, line...)
			b.ends = append(b.ends, len(b.buf))
		}
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
	res := v.res
	c := 0 // the chunk of line i
	for i := range b.results {
		r := &b.results[i]
		if i == b.chunks[c].end {
			c++
		}
		lineNo := b.firstLine + i
		if r.err != nil {
			return r.err
		}
		switch {
		case v.rng != nil && r.index != v.next:
			return fail(CheckBundle, "line %d: index %d is not %d: a range bundle holds every index in order", lineNo, r.index, v.next)
		case r.index < v.next:
			if res.Events > 0 {
				return fail(CheckBundle, "line %d: index %d is not above the previous event's %d", lineNo, r.index, res.LastIndex)
			}
			return fail(CheckSelection, "line %d: index %d is below the selection's from %d", lineNo, r.index, v.next)
		}
		if why := res.Selection.match(r.index, r.ev); why != "" {
			return fail(CheckSelection, "line %d: entry %d does not match the bundle's selection: %s", lineNo, r.index, why)
		}
		if v.rng != nil {
			var err error
			switch ch := b.chunks[c]; {
			case ch.rng == nil: // cannot happen once the checks above passed
				err = v.rng.Append(r.leaf[:], nil)
			case i == ch.end-1:
				err = v.rng.AppendRange(ch.rng, nil)
			}
			if err != nil {
				return fail(CheckInclusion, "line %d: %v", lineNo, err)
			}
		}
		if r.delta != nil {
			if err := v.chains.add(r.index, r.delta); err != nil {
				return fail(CheckDelta, "line %d: %v", lineNo, err)
			}
		}
		if res.Events == 0 {
			res.FirstIndex, res.FirstTime, res.LastTime = r.index, r.ev.Time, r.ev.Time
		}
		res.Events++
		res.LastIndex = r.index
		v.next = r.index + 1
		if r.ev.Time.Before(res.FirstTime) {
			res.FirstTime = r.ev.Time
		}
		if r.ev.Time.After(res.LastTime) {
			res.LastTime = r.ev.Time
		}
		res.ByActor[r.ev.Actor]++
		res.ByKind[r.ev.Kind]++
		if r.ev.Type != "" {
			res.ByActionType[r.ev.Type]++
		}
	}
	return nil
}

func (v *bundleVerifier) trailer(line []byte) error {
	var t BundleTrailer
	if err := parseJSONLine(line, &t); err != nil {
		return fail(CheckBundle, "line %d (trailer): %v", v.line, err)
	}
	if t.End != BundleFormat {
		return fail(CheckBundle, "line %d: trailer end %q is not %q", v.line, abbreviate(t.End), BundleFormat)
	}
	if t.Events != v.res.Events {
		return fail(CheckBundle, "the trailer counts %d events, the bundle holds %d", t.Events, v.res.Events)
	}
	return nil
}

// finish checks what needs every event: at least one, the range's root.
func (v *bundleVerifier) finish() (*BundleResult, error) {
	res := v.res
	if res.Events == 0 {
		return nil, fail(CheckBundle, "the bundle holds no event")
	}
	if v.rng != nil {
		if res.LastIndex+1 != *v.h.Selection.To {
			return nil, fail(CheckBundle, "the range bundle ends at index %d, its selection at %d", res.LastIndex, *v.h.Selection.To-1)
		}
		if err := v.rng.AppendRange(v.right, nil); err != nil {
			return nil, fail(CheckInclusion, "%v", err)
		}
		root, err := v.rng.GetRootHash(nil)
		if err != nil {
			return nil, fail(CheckInclusion, "%v", err)
		}
		if !bytes.Equal(root, res.RootHash[:]) {
			return nil, fail(CheckInclusion, "entries [%d, %d) with the left and right hashes lead to root %s, the checkpoint's root is %s",
				*v.h.Selection.From, *v.h.Selection.To, b64(root), b64(res.RootHash[:]))
		}
	}
	res.Sessions = v.chains.list()
	return res, nil
}
