package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/annal-dev/annal/internal/atomicfile"
	bolt "go.etcd.io/bbolt"
)

// migrateIndex moves the state file db, at path, whose history index is
// of eventsFormat (a key per term and event, term || 0x00 || big-endian
// index) into this format: it writes a new file beside it (path +
// ".migrate") with the same meta and ledger and the index in blocks
// (bucketHistory), syncs it, and renames it over path; db is closed, and
// the file opened again is returned. Why a new file, as a rebuild writes
// one: the old index is some thirty times the size of the new (1 GB for
// ten million entries, against 29 MB), and bbolt never gives back a
// page, so a move in place would leave the file at its old size and every
// commit writing the list of its free pages. Why move it at all rather than
// fold the log again, as for other older formats: the ledger is the same
// in both, and reading keys in order is many times faster than folding a
// large log. A move cut short leaves the file as it was (a .migrate file
// left by a crash is made again).
func migrateIndex(db *bolt.DB, path string) (*bolt.DB, error) {
	tmp := path + ".migrate"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return db, err
	}
	// No sync per transaction: the file is synced once, before it takes
	// the state file's place; until then no one reads it.
	moved, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second, NoSync: true, NoGrowSync: true})
	if err != nil {
		return db, err
	}
	err = db.View(func(src *bolt.Tx) error { return copyMigrated(src, moved) })
	if err == nil {
		err = moved.Sync()
	}
	if cerr := moved.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return db, err
	}
	if err := db.Close(); err != nil {
		return db, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
}

// copyMigrated writes into dst, an empty state file, the meta bucket of
// src with storeFormat, its ledger bucket as it is, and its old index in
// blocks, in transactions of at most indexChunk keys.
func copyMigrated(src *bolt.Tx, dst *bolt.DB) error {
	err := dst.Update(func(tx *bolt.Tx) error {
		if err := emptyState(tx, ""); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if err := src.Bucket(bucketMeta).ForEach(meta.Put); err != nil {
			return err
		}
		return meta.Put(keyFormat, storeFormat)
	})
	if err != nil {
		return err
	}
	if b := src.Bucket(BucketLedger); b != nil { // readState moves only a file that has one
		if err := copyBucket(b.Cursor(), dst); err != nil {
			return err
		}
	}
	c := src.Bucket(bucketEvents).Cursor()
	for k, _ := c.First(); k != nil; {
		var p *postings
		p, k = oldIndexChunk(c, k)
		err := dst.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketHistory)
			b.FillPercent = 0.9 // keys arrive in order: fill pages
			return putBlocks(b, p)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// copyBucket copies the ledger bucket's keys and values from the cursor
// into dst's, indexChunk keys a transaction.
func copyBucket(c *bolt.Cursor, dst *bolt.DB) error {
	k, v := c.First()
	for k != nil {
		err := dst.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(BucketLedger)
			b.FillPercent = 0.9 // keys arrive in order
			for n := 0; k != nil && n < indexChunk; n++ {
				// bbolt keeps the value until the commit, and src's
				// pages are src's: the value is copied.
				if err := b.Put(k, bytes.Clone(v)); err != nil {
					return err
				}
				k, v = c.Next()
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// oldIndexChunk reads up to indexChunk keys of the old index from the
// cursor's key k on, and returns them grouped by term with the key to go
// on from (nil: there are no more). A key that is not of the old form is
// passed over: the index only proposes candidates.
func oldIndexChunk(c *bolt.Cursor, k []byte) (*postings, []byte) {
	p := newPostings()
	for n := 0; k != nil && n < indexChunk; k, _ = c.Next() {
		if len(k) >= 10 && k[len(k)-9] == 0 {
			p.add(binary.BigEndian.Uint64(k[len(k)-8:]), [][]byte{k[:len(k)-9]})
		}
		n++
	}
	return p, k
}
