package history

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestRebuiltStateIndexesAcrossChunks: the rebuilt state file's history
// index, written indexChunk entries at a time while the log folds (each
// chunk added at the end of every term's blocks), holds every entry once,
// and the file takes the state file's place with its fold record.
func TestRebuiltStateIndexesAcrossChunks(t *testing.T) {
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.db")
	r, err := createRebuiltState(statePath+".rebuild", "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	events := indexChunk/2 + 1000 // three terms an event: more than one chunk
	for i := range uint64(events) {
		terms := [][]byte{term(termActor, fmt.Sprintf("agent-%d", i%7)), term(termEnvelope, fmt.Sprintf("env-%d", i%3)), term(termSession, "s")}
		r.add(i, terms)
		for _, tm := range terms {
			want = append(want, indexEntry(tm, i))
		}
	}
	slices.Sort(want)
	if err := r.finishIndex(); err != nil {
		t.Fatal(err)
	}
	if err := r.commit(map[string][]byte{"actor/root": []byte(`{}`)}, FoldedRecord{Size: uint64(events)}, statePath); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(statePath, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []string
	var folded FoldedRecord
	if err := db.View(func(tx *bolt.Tx) error {
		folded, _ = decodeFoldedRecord(tx.Bucket(bucketMeta).Get(keyFolded))
		got = indexEntries(t, tx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if folded.Size != uint64(events) || folded.Keys != 1 {
		t.Fatalf("fold record %+v", folded)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the index holds %d entries, want %d (or other entries)", len(got), len(want))
	}
}
