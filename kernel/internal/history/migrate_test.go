package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/annal-dev/annal/kernel/internal/ledger"

	bolt "go.etcd.io/bbolt"
)

// writeEventsFormat makes the state file at path one of eventsFormat with
// a ledger folded to size and an old index (a key per term and event) of
// entries.
func writeEventsFormat(t *testing.T, path string, size uint64, entries []string) {
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
		if err := tx.DeleteBucket(bucketHistory); err != nil {
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

// TestOpenMovesAnIndexOfTheEventsFormatIntoBlocks: a state file written by
// the release before (a key per term and event) opens with its ledger kept
// (not folded again) and its index moved into blocks, entry for entry,
// over several transactions, in a file a fraction of the old one's size;
// a file a move cut short left beside it is no hindrance.
func TestOpenMovesAnIndexOfTheEventsFormatIntoBlocks(t *testing.T) {
	var entries []string
	for i := range uint64(indexChunk + indexChunk/2) { // more than one transaction's worth
		entries = append(entries, indexEntry([]byte(fmt.Sprintf("aagent-%d", i%5)), i*3))
		if i%1000 == 0 {
			entries = append(entries, indexEntry([]byte("odenied"), i*3))
		}
	}
	slices.Sort(entries)
	for _, cutShort := range []bool{false, true} {
		t.Run(fmt.Sprintf("cut short before %v", cutShort), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			writeEventsFormat(t, path, 7, entries)
			if cutShort {
				if err := os.WriteFile(path+".migrate", []byte("half a bbolt file"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			old, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			opened, err := OpenStateCache(path, "example.com/log")
			if err != nil {
				t.Fatal(err)
			}
			defer opened.Store.Close()
			if opened.Reset || opened.Damaged != nil || opened.Folded.Size != 7 || opened.Folded.Leaf != [32]byte{9} || opened.Ledger.Size != 7 {
				t.Fatalf("opened: reset %v, damaged %v, folded %+v: the ledger was not kept", opened.Reset, opened.Damaged, opened.Folded)
			}
			if err := opened.Store.DB.View(func(tx *bolt.Tx) error {
				if got := indexEntries(t, tx); !slices.Equal(got, entries) {
					t.Errorf("the moved index holds %d entries, want %d (or others)", len(got), len(entries))
				}
				if tx.Bucket(bucketEvents) != nil {
					t.Error("the old index is still there")
				}
				meta := tx.Bucket(bucketMeta)
				if f := meta.Get(keyFormat); !bytes.Equal(f, storeFormat) {
					t.Errorf("format %q", f)
				}
				if o := meta.Get(keyOrigin); string(o) != "example.com/log" {
					t.Errorf("origin %q", o)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			now, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if now.Size() > old.Size()/4 {
				t.Errorf("the state file went from %d to %d bytes; the old index's pages were kept", old.Size(), now.Size())
			}
			if _, err := os.Stat(path + ".migrate"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the move's file is left: %v", err)
			}
			// It opens again as it is, with nothing left to move.
			if err := opened.Store.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := OpenStateCache(path, "example.com/log")
			if err != nil || again.Reset || again.Damaged != nil || again.Folded.Size != 7 {
				t.Fatalf("opened again: %v, %+v", err, again)
			}
			opened = again
		})
	}
}
