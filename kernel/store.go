package kernel

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/transparency-dev/tessera/api/layout"
	bolt "go.etcd.io/bbolt"
)

var (
	bucketMeta   = []byte("meta")
	bucketLedger = []byte("ledger")
	keyOrigin    = []byte("origin")
)

// store keeps a copy of the ledger in bbolt, so that a restart folds only
// the log's tail. It is a cache of the log: it may lag behind it (a crash
// loses what was not yet written), never run ahead of it, and `annald
// rebuild` can always recompute it from the log alone.
type store struct {
	db *bolt.DB
}

func openStore(path, origin string) (*store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketLedger); err != nil {
			return err
		}
		if have := meta.Get(keyOrigin); have == nil {
			return meta.Put(keyOrigin, []byte(origin))
		} else if string(have) != origin {
			return fmt.Errorf("state file belongs to log %q, not %q", have, origin)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

// load reads the stored ledger; an empty store gives an empty ledger.
func (s *store) load() (*ledger.Ledger, error) {
	stored := map[string][]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLedger).ForEach(func(k, v []byte) error {
			stored[string(k)] = append([]byte(nil), v...)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return ledger.Load(stored)
}

// write stores encoded ledger keys in one transaction. replace first
// empties the store (for rebuild).
func (s *store) write(values map[string][]byte, replace bool) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if replace {
			if err := tx.DeleteBucket(bucketLedger); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bucketLedger); err != nil {
				return err
			}
		}
		b := tx.Bucket(bucketLedger)
		for k, v := range values {
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// foldLog applies the log's entries [l.Size, size) to l, reading a bundle
// at a time. Every entry is parsed strictly; parsing (the costly part) runs
// on all cores, folding in log order on one.
func foldLog(ctx context.Context, tl *tileLog, l *ledger.Ledger, size uint64) error {
	workers := runtime.GOMAXPROCS(0)
	for l.Size < size {
		from := l.Size
		bundleIndex := from / layout.EntryBundleWidth
		b, err := tl.readBundle(ctx, bundleIndex, size)
		if err != nil {
			return err
		}
		end := min(size, (bundleIndex+1)*layout.EntryBundleWidth)
		n := int(end - from)
		events := make([]*event.Event, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < n; j += workers {
					events[j], errs[j] = event.Parse(b.Entries[(from+uint64(j))%layout.EntryBundleWidth])
				}
			}()
		}
		wg.Wait()
		for j := range n {
			i := from + uint64(j)
			if errs[j] != nil {
				return fmt.Errorf("log entry %d: %w", i, errs[j])
			}
			if err := l.Fold(i, events[j]); err != nil {
				return err
			}
		}
	}
	return nil
}
