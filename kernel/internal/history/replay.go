package history

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/transparency-dev/tessera/api/layout"
)

// FoldLog applies the log's entries [l.Size, size) to l, reading a bundle
// at a time. Every entry is parsed strictly; parsing (the costly part) runs
// on all cores and one bundle ahead (parseAhead), while the entries before
// it are folded in log order on one. An entry that breaks a rule stops it
// (a *RefusedEntryError) unless a later log.tolerated entry names it: the
// ledger then passes over it (tolerate.go).
func FoldLog(ctx context.Context, tl *logstore.Log, l *ledger.Ledger, size uint64, folded ...func(uint64, *event.Event)) error {
	return FoldLogAccepting(ctx, tl, l, size, nil, folded...)
}

// FoldLogAccepting is foldLog that also passes over the entries in accept
// that break a rule, which annald tolerate is about to name.
func FoldLogAccepting(ctx context.Context, tl *logstore.Log, l *ledger.Ledger, size uint64, accept map[uint64]bool, folded ...func(uint64, *event.Event)) error {
	_, err := foldLog(ctx, tl, l, size, accept, parseWork{origin: l.Origin}, func(p *parsedRun, j int) {
		for _, f := range folded {
			f(p.from+uint64(j), p.events[j])
		}
	})
	return err
}

// foldLog is FoldLogAccepting with more work done on all cores ahead of
// the fold (work), and after(p, j) called for each entry p.events[j] once
// it is folded. It returns how many signatures the fold found verified
// ahead.
func foldLog(ctx context.Context, tl *logstore.Log, l *ledger.Ledger, size uint64, accept map[uint64]bool, work parseWork, after func(p *parsedRun, j int)) (ahead uint64, err error) {
	if l.Size < size {
		// Sequenced entries reach the tree later on Tessera's AWS driver.
		if _, err := tl.WaitIntegrated(ctx, size); err != nil {
			return 0, err
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	read := func(bundleIndex uint64) ([][]byte, error) {
		b, err := tl.ReadBundle(ctx, bundleIndex, size)
		if err != nil {
			return nil, err
		}
		return b.Entries, nil
	}
	var at foldCursor
	if work.origin != "" {
		defer at.verifyAheadFor(l)()
	}
	for p := range parseAhead(l.Size, size, read, stop, work) {
		if p.err != nil {
			return at.ahead, p.err
		}
		for j, ev := range p.events {
			i := p.from + uint64(j)
			at.run, at.j = &p, j
			if p.errs[j] != nil {
				return at.ahead, fmt.Errorf("log entry %d: %w", i, p.errs[j])
			}
			if err := l.Fold(i, ev); err != nil {
				if err := passOver(ctx, l, i, ev, p.entries[j], err, read, size, accept); err != nil {
					return at.ahead, err
				}
			}
			after(&p, j)
		}
	}
	if l.Size < size {
		return at.ahead, fmt.Errorf("folded %d of the log's %d entries", l.Size, size)
	}
	return at.ahead, nil
}

// foldCursor is the entry a replay is folding, run.events[j], so that the
// ledger's fold can ask whether its signature was verified ahead; ahead
// counts the signatures that were.
type foldCursor struct {
	run   *parsedRun
	j     int
	ahead uint64
}

// verifyAheadFor has l's folds take the signature of the entry at c as
// verified when parseAhead verified it, and returns what undoes that.
func (c *foldCursor) verifyAheadFor(l *ledger.Ledger) (undo func()) {
	l.VerifiedAhead = func(ev *event.Event, origin, vkey string) bool {
		ok := c.run.verifiedAs(c.j, ev, origin, vkey)
		if ok {
			c.ahead++
		}
		return ok
	}
	return func() { l.VerifiedAhead = nil }
}

// parseWork is what parseAhead computes for each entry besides its event:
// its leaf hash (an audit's tree), its history index terms (a rebuild's
// index), its signature checked (signatures.go). They read the entry or
// its event alone (and the signing keys met before), so they run on all
// cores with the parse instead of on the fold's one.
type parseWork struct {
	leaves, terms bool
	// origin: verify the signatures of signed events over their
	// statements in this log origin (verifySignatures); "" does not.
	origin string
}

// parsedRun is a run of consecutive entries of one entry bundle, from
// index from, each parsed (events[j], or errs[j]) and, as parseWork asks,
// hashed (leaves[j]) and its index terms found (terms[j]); err is why the
// bundle could not be read, and ends the runs.
type parsedRun struct {
	from    uint64
	entries [][]byte
	events  []*event.Event
	errs    []error
	leaves  [][32]byte
	terms   [][][]byte
	// verifiedBy[j] is the signing key the signature of events[j] was
	// verified under, over its statement in the log origin; nil when no
	// signature of the run was.
	verifiedBy []string
	origin     string
	err        error
}

// verifiedAs reports whether the signature of ev, the run's entry j, was
// verified over its statement in origin under the signing key vkey.
func (p *parsedRun) verifiedAs(j int, ev *event.Event, origin, vkey string) bool {
	return p != nil && p.verifiedBy != nil && j < len(p.events) && p.events[j] == ev &&
		vkey != "" && p.origin == origin && p.verifiedBy[j] == vkey
}

// bundleRead is an entry bundle as parseAhead's reader read it.
type bundleRead struct {
	index   uint64
	entries [][]byte
	err     error
}

// parseAhead reads the entries [from, size) a bundle at a time (read
// returns the whole bundle of the index it is given) and parses each run
// on all cores, one run ahead of its reader, in order; the next bundles
// are read while one is parsed. Closing stop ends it early.
func parseAhead(from, size uint64, read func(bundleIndex uint64) ([][]byte, error), stop <-chan struct{}, work parseWork) <-chan parsedRun {
	runs := make(chan parsedRun, 1)
	bundles := readAhead(from, size, read, stop)
	go func() {
		defer close(runs)
		workers := runtime.GOMAXPROCS(0)
		keys := signingKeys{}
		for b := range bundles {
			end := min(size, (b.index+1)*layout.EntryBundleWidth)
			p := parsedRun{from: from}
			switch first := b.index * layout.EntryBundleWidth; {
			case b.err != nil:
				p.err = b.err
			case uint64(len(b.entries)) < end-first:
				p.err = fmt.Errorf("entry bundle %d holds %d entries, the log needs %d", b.index, len(b.entries), end-first)
			default:
				p.parse(b.entries[from-first:end-first], work, workers)
				if work.origin != "" {
					for _, ev := range p.events {
						if ev != nil {
							keys.learn(ev)
						}
					}
					p.verifySignatures(keys, work.origin, workers)
				}
			}
			select {
			case runs <- p:
			case <-stop:
				return
			}
			if p.err != nil {
				return
			}
			from = end
		}
	}()
	return runs
}

// readAhead reads the bundles that hold the entries [from, size), in
// order, two ahead of their reader; it stops after an error.
func readAhead(from, size uint64, read func(bundleIndex uint64) ([][]byte, error), stop <-chan struct{}) <-chan bundleRead {
	bundles := make(chan bundleRead, 2)
	go func() {
		defer close(bundles)
		for b := from / layout.EntryBundleWidth; from < size && b*layout.EntryBundleWidth < size; b++ {
			entries, err := read(b)
			select {
			case bundles <- bundleRead{index: b, entries: entries, err: err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return bundles
}

// parse parses entries into p on workers goroutines, and does work.
func (p *parsedRun) parse(entries [][]byte, work parseWork, workers int) {
	n := len(entries)
	p.entries = entries
	p.events, p.errs = make([]*event.Event, n), make([]error, n)
	if work.leaves {
		p.leaves = make([][32]byte, n)
	}
	if work.terms {
		p.terms = make([][][]byte, n)
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := w; j < n; j += workers {
				p.events[j], p.errs[j] = event.Parse(entries[j])
				if work.leaves {
					p.leaves[j] = event.LeafHash(entries[j])
				}
				if work.terms && p.events[j] != nil {
					p.terms[j] = IndexTerms(p.events[j])
				}
			}
		}()
	}
	wg.Wait()
}
