package history

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/annal-dev/annal/internal/atomicfile"
	bolt "go.etcd.io/bbolt"
)

// rebuiltState is the state file a rebuild writes as it folds the log: a
// new file beside the data folder's, which takes its place only once the
// replay is whole (commit). Why a new file: the history index is written
// while the log is folded, by a goroutine of its own, instead of after it
// (it was a fifth of a rebuild's time, all on one core), and yet a
// rebuild that fails or is cut short leaves the state file as it was.
type rebuiltState struct {
	path   string
	origin string
	store  *Store
	cur    *postings
	chunks chan *postings
	done   chan error
	closed bool
}

// createRebuiltState creates an empty state file of the log origin at
// path (any file there is from a rebuild cut short) and starts its index
// writer.
func createRebuiltState(path, origin string) (*rebuiltState, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// No sync per transaction: the file is synced once, before it takes
	// the state file's place; until then no one reads it.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: true, NoGrowSync: true})
	if err != nil {
		return nil, err
	}
	r := &rebuiltState{path: path, origin: origin, store: &Store{DB: db}, cur: newPostings(), chunks: make(chan *postings, 1), done: make(chan error, 1)}
	if err := db.Update(func(tx *bolt.Tx) error { return emptyState(tx, origin) }); err != nil {
		r.discard()
		return nil, err
	}
	go func() {
		var err error
		for p := range r.chunks {
			if err == nil {
				err = r.store.writeIndex(p)
			}
		}
		r.done <- err
	}()
	return r, nil
}

// add indexes the folded event at index by terms; every indexChunk
// entries go to the index writer, in log order (each term's blocks are
// added at its end of the index).
func (r *rebuiltState) add(index uint64, terms [][]byte) {
	r.cur.add(index, terms)
	if r.cur.indices >= indexChunk {
		r.chunks <- r.cur
		r.cur = newPostings()
	}
}

// finishIndex hands the writer the last keys and waits for it.
func (r *rebuiltState) finishIndex() error {
	if r.closed {
		return errors.New("the rebuilt index was already finished")
	}
	r.chunks <- r.cur
	close(r.chunks)
	r.closed = true
	return <-r.done
}

// commit writes the ledger's values and the fold record, syncs the file
// and puts it in place of the state file at statePath, which must be
// closed by then.
func (r *rebuiltState) commit(values map[string][]byte, folded FoldedRecord, statePath string) error {
	if err := r.store.write(values, newPostings(), folded); err != nil {
		return err
	}
	if err := r.store.DB.Sync(); err != nil {
		return err
	}
	if err := r.store.Close(); err != nil {
		return err
	}
	if err := os.Rename(r.path, statePath); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(statePath))
}

// discard stops the index writer, closes the file and removes it.
func (r *rebuiltState) discard() {
	if !r.closed {
		close(r.chunks)
		r.closed = true
		<-r.done
	}
	_ = r.store.Close()
	_ = os.Remove(r.path)
}
