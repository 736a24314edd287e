package history

import (
	"bytes"
	"slices"
	"testing"
)

// TestPostingsYieldKeysInByteOrder: the keys postings hand bbolt are the
// sorted index keys, each once per term and index, whatever order the
// events came in and though one term begins another ("a" and "ab").
func TestPostingsYieldKeysInByteOrder(t *testing.T) {
	events := []IndexedEvent{
		{Index: 7, Terms: [][]byte{[]byte("ab"), []byte("e1")}},
		{Index: 2, Terms: [][]byte{[]byte("a"), []byte("ab")}},
		{Index: 300, Terms: [][]byte{[]byte("a"), []byte("b")}},
		{Index: 1 << 40, Terms: [][]byte{[]byte("a")}},
		{Index: 5, Terms: [][]byte{[]byte("a\x01")}},
	}
	var want [][]byte
	for _, ie := range events {
		for _, term := range ie.Terms {
			want = append(want, indexKey(term, ie.Index))
		}
	}
	slices.SortFunc(want, bytes.Compare)
	var got [][]byte
	if err := postingsOf(events).each(func(k []byte) error {
		got = append(got, bytes.Clone(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("keys %q, want %q", got, want)
	}
}
