package history

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// indexEntry is one (term, log index) pair of the history index, as a
// string that sorts as the old per-event keys did: term || 0x00 ||
// big-endian index.
func indexEntry(t []byte, index uint64) string {
	return string(binary.BigEndian.AppendUint64(append(append([]byte(nil), t...), 0), index))
}

// indexEntries reads every (term, index) pair the history index of tx
// holds, sorted, and fails the test on a key or value that is not well
// formed.
func indexEntries(t *testing.T, tx *bolt.Tx) []string {
	t.Helper()
	var got []string
	err := tx.Bucket(bucketHistory).ForEach(func(k, v []byte) error {
		if len(k) < 10 || k[len(k)-9] != 0 {
			return fmt.Errorf("key %q is not term || 0x00 || block", k)
		}
		block := binary.BigEndian.Uint64(k[len(k)-8:])
		indices := decodeBlock(nil, block, v)
		if len(indices) == 0 || string(encodeBlock(nil, block, indices)) != string(v) {
			return fmt.Errorf("key %q: value %x is not a whole block (reads as %v)", k, v, indices)
		}
		for _, i := range indices {
			got = append(got, indexEntry(k[:len(k)-9], i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

// TestBlockEncodingRoundTrips: a block's value reads back as the indices
// it was made of, for sets at the block's edges, dense and sparse; and
// each index costs one byte when the events of a term follow closely.
func TestBlockEncodingRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, block := range []uint64{0, 1, 7, 1<<50 - 1} {
		first := block * indexBlock
		sets := [][]uint64{
			{first},
			{first + indexBlock - 1},
			{first, first + indexBlock - 1},
			{first + 1, first + 2, first + 3},
		}
		var dense, sparse []uint64
		for i := range uint64(indexBlock) {
			dense = append(dense, first+i)
			if rng.IntN(50) == 0 {
				sparse = append(sparse, first+i)
			}
		}
		sets = append(sets, dense, sparse)
		for _, set := range sets {
			v := encodeBlock(nil, block, set)
			if got := decodeBlock(nil, block, v); !slices.Equal(got, set) {
				t.Fatalf("block %d: %d indices read back as %d (first %v)", block, len(set), len(got), got[:min(len(got), 3)])
			}
		}
		if v := encodeBlock(nil, block, dense); len(v) != indexBlock {
			t.Errorf("a dense block is %d bytes, want one a index (%d)", len(v), indexBlock)
		}
	}
}

// TestDecodeBlockStopsAtDamage: what a damaged value holds before the
// damage is read, nothing after it, and never an index outside the block.
func TestDecodeBlockStopsAtDamage(t *testing.T) {
	const block = 3
	first := uint64(block * indexBlock)
	for _, c := range []struct {
		name  string
		value []byte
		want  []uint64
	}{
		{"empty", nil, nil},
		{"cut varint", []byte{0x05, 0x80}, []uint64{first + 5}},
		{"first past the block", binary.AppendUvarint(nil, indexBlock), nil},
		{"last index of the block", binary.AppendUvarint(nil, indexBlock-1), []uint64{first + indexBlock - 1}},
		{"nothing may follow the last index", append(binary.AppendUvarint(nil, indexBlock-1), 0), []uint64{first + indexBlock - 1}},
		{"a delta past the block", append([]byte{0x02}, binary.AppendUvarint(nil, indexBlock-3)...), []uint64{first + 2}},
		{"the largest delta", append([]byte{0x02}, binary.AppendUvarint(nil, 1<<64-1)...), []uint64{first + 2}},
		{"an overlong varint", append([]byte{0x01}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), []uint64{first + 1}},
	} {
		if got := decodeBlock(nil, block, c.value); !slices.Equal(got, c.want) {
			t.Errorf("%s: %x reads as %v, want %v", c.name, c.value, got, c.want)
		}
	}
}

// FuzzDecodeBlock: any bytes under any block key read as indices of that
// block, strictly increasing; and what they read as encodes to a value
// that reads the same (so a write that rewrites a damaged block keeps
// what could be read, and nothing else).
func FuzzDecodeBlock(f *testing.F) {
	f.Add(uint64(0), []byte{})
	f.Add(uint64(3), []byte{0, 0, 0, 5, 200, 1})
	f.Add(uint64(1<<50-1), encodeBlock(nil, 1<<50-1, []uint64{(1<<50-1)*indexBlock + 9}))
	f.Add(uint64(1<<63), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, block uint64, value []byte) {
		block %= 1 << 50 // a block's first index fits in 64 bits
		got := decodeBlock(nil, block, value)
		for j, i := range got {
			if i/indexBlock != block || (j > 0 && i <= got[j-1]) {
				t.Fatalf("%x in block %d reads as %v", value, block, got)
			}
		}
		if again := decodeBlock(nil, block, encodeBlock(nil, block, got)); !slices.Equal(again, got) {
			t.Fatalf("%v encoded reads as %v", got, again)
		}
	})
}

// TestPostingsWriteEveryEntryOnceInBlocks: what Write puts in the index is
// every (term, index) pair once, however the events came (out of order,
// twice, across blocks, in terms that begin one another, "a" and "ab"),
// and a second write of the same pairs and of new ones (as after a crash,
// when the kernel folds again what it had indexed) adds only the new ones.
func TestPostingsWriteEveryEntryOnceInBlocks(t *testing.T) {
	c, err := OpenStateCache(filepath.Join(t.TempDir(), "state.db"), "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Store.Close()
	first := []IndexedEvent{
		{Index: 7, Terms: [][]byte{[]byte("ab"), []byte("e1")}},
		{Index: 2, Terms: [][]byte{[]byte("a"), []byte("ab")}},
		{Index: indexBlock + 300, Terms: [][]byte{[]byte("a"), []byte("b")}},
		{Index: 1 << 40, Terms: [][]byte{[]byte("a")}},
		{Index: 5, Terms: [][]byte{[]byte("a\x01")}},
		{Index: 2, Terms: [][]byte{[]byte("a")}},
	}
	second := []IndexedEvent{
		{Index: indexBlock + 300, Terms: [][]byte{[]byte("a"), []byte("b")}}, // again
		{Index: 3, Terms: [][]byte{[]byte("a")}},                             // between indices held
		{Index: indexBlock + 301, Terms: [][]byte{[]byte("a")}},              // after them
	}
	want := map[string]bool{}
	check := func(events []IndexedEvent) {
		t.Helper()
		for _, ie := range events {
			for _, tm := range ie.Terms {
				want[indexEntry(tm, ie.Index)] = true
			}
		}
		if err := c.Store.Write(nil, events, FoldedRecord{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Store.DB.View(func(tx *bolt.Tx) error {
			if got := indexEntries(t, tx); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
				t.Fatalf("the index holds %q, want %v", got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	check(first)
	check(second)
}
