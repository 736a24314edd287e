package history

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/annal-dev/annal/kernel/internal/ledger"

	bolt "go.etcd.io/bbolt"
)

// writeEventsFormat makes the state file at path one of eventsFormat with
// a ledger folded to size and an old index (a key per term and event) of
// entries; partial, if any, is put in the new index too, as a migration
// cut short leaves it.
func writeEventsFormat(t *testing.T, path string, size uint64, entries, partial []string) {
	t.Helper()
	c, err := OpenStateCache(path, "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	folded := ledger.New()
	folded.Size = size
	values := map[string][]byte{}
	for _, key := range folded.Keys() {
		values[key], _ = folded.Encode(key)
	}
	if err := c.Store.Write(values, nil, FoldedRecord{Size: size, Leaf: [32]byte{9}}); err != nil {
		t.Fatal(err)
	}
	err = c.Store.DB.Update(func(tx *bolt.Tx) error {
		old, err := tx.CreateBucket(bucketEvents)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := old.Put([]byte(e), nil); err != nil {
				return err
			}
		}
		if err := old.Put([]byte("not an index key"), nil); err != nil { // passed over
			return err
		}
		p := newPostings()
		for _, e := range partial {
			p.add(uint64FromEntry(e), [][]byte{[]byte(e[:len(e)-9])})
		}
		if err := indexIn(tx, p); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyFormat, eventsFormat)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Store.Close(); err != nil {
		t.Fatal(err)
	}
}

func uint64FromEntry(e string) uint64 {
	var i uint64
	for _, b := range []byte(e[len(e)-8:]) {
		i = i<<8 | uint64(b)
	}
	return i
}

// TestOpenMovesAnIndexOfTheEventsFormatIntoBlocks: a state file written by
// the release before (a key per term and event) opens with its ledger kept
// (not folded again) and its index moved into blocks, entry for entry,
// over several transactions; and a move cut short, which left part of the
// new index and the old format, is finished by the next open.
func TestOpenMovesAnIndexOfTheEventsFormatIntoBlocks(t *testing.T) {
	var entries []string
	for i := range uint64(indexChunk + indexChunk/2) { // more than one transaction's worth
		entries = append(entries, indexEntry([]byte(fmt.Sprintf("aagent-%d", i%5)), i*3))
		if i%1000 == 0 {
			entries = append(entries, indexEntry([]byte("odenied"), i*3))
		}
	}
	slices.Sort(entries)
	for _, c := range []struct {
		name    string
		partial []string
	}{
		{"whole", nil},
		{"cut short", entries[:len(entries)/3]},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			writeEventsFormat(t, path, 7, entries, c.partial)
			opened, err := OpenStateCache(path, "example.com/log")
			if err != nil {
				t.Fatal(err)
			}
			defer opened.Store.Close()
			if opened.Reset || opened.Damaged != nil || opened.Folded.Size != 7 || opened.Folded.Leaf != [32]byte{9} {
				t.Fatalf("opened: reset %v, damaged %v, folded %+v: the ledger was not kept", opened.Reset, opened.Damaged, opened.Folded)
			}
			if err := opened.Store.DB.View(func(tx *bolt.Tx) error {
				if got := indexEntries(t, tx); !slices.Equal(got, entries) {
					t.Errorf("the moved index holds %d entries, want %d (or others)", len(got), len(entries))
				}
				if tx.Bucket(bucketEvents) != nil {
					t.Error("the old index is still there")
				}
				if f := tx.Bucket(bucketMeta).Get(keyFormat); !bytes.Equal(f, storeFormat) {
					t.Errorf("format %q", f)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
