package history

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestCandidatesAcrossBlocks: the candidates of a term, read from blocks
// of the index and from the tail not yet persisted, are every index the
// term's events have, from start on, in the page's order, each once: for
// logs of several blocks with terms dense and sparse, starts inside,
// between and past blocks, both orders, and a tail that overlaps what was
// persisted (persist writes before it lets go of the tail).
func TestCandidatesAcrossBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 7))
	terms := [][]byte{[]byte("adense"), []byte("asparse"), []byte("arare"), []byte("aother")}
	for round := range 12 {
		size := uint64(1 + rng.IntN(4*indexBlock))
		var events []IndexedEvent
		has := map[string][]uint64{}
		for i := range size {
			var ts [][]byte
			if rng.IntN(2) == 0 {
				ts = append(ts, terms[0])
			}
			if rng.IntN(40) == 0 {
				ts = append(ts, terms[1])
			}
			if rng.IntN(3000) == 0 {
				ts = append(ts, terms[2])
			}
			for _, tm := range ts {
				has[string(tm)] = append(has[string(tm)], i)
			}
			events = append(events, IndexedEvent{Index: i, Terms: ts})
		}
		tailFrom := uint64(rng.Int64N(int64(size) + 1))
		persistedTo := min(size, tailFrom+uint64(rng.IntN(200))) // persisted, not yet dropped from the tail
		c, err := OpenStateCache(filepath.Join(t.TempDir(), "state.db"), "example.com/log")
		if err != nil {
			t.Fatal(err)
		}
		// In two writes, as persist does, the second adding to blocks the
		// first began.
		cut := persistedTo / 2
		for _, part := range [][]IndexedEvent{events[:cut], events[cut:persistedTo]} {
			if err := c.Store.Write(nil, part, FoldedRecord{}); err != nil {
				t.Fatal(err)
			}
		}
		tail := events[tailFrom:]
		for trial := range 20 {
			src := [][]byte{terms[rng.IntN(len(terms))]}
			if trial%5 == 0 {
				src = [][]byte{terms[1], terms[2]}
			}
			oldest := rng.IntN(2) == 0
			start := uint64(rng.Int64N(int64(size)))
			var want []uint64
			for _, tm := range src {
				for _, i := range has[string(tm)] {
					if (oldest && i >= start) || (!oldest && i <= start) {
						want = append(want, i)
					}
				}
			}
			slices.Sort(want)
			if !oldest {
				slices.Reverse(want)
			}
			var got []uint64
			if err := c.Store.DB.View(func(tx *bolt.Tx) error {
				next := candidates(tx.Bucket(bucketHistory), tail, src, start, size, oldest)
				for i, ok := next(); ok; i, ok = next() {
					got = append(got, i)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				name := fmt.Sprintf("round %d: size %d, tail from %d, persisted to %d, terms %q, start %d, oldest %v", round, size, tailFrom, persistedTo, src, start, oldest)
				t.Fatalf("%s: %d candidates %v…, want %d %v…", name, len(got), got[:min(len(got), 5)], len(want), want[:min(len(want), 5)])
			}
		}
		c.Store.Close()
	}
}
