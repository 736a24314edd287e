package history

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// migrateIndex moves a state file's history index of eventsFormat (a key
// per term and event, term || 0x00 || big-endian index) into blocks
// (bucketHistory), indexChunk keys a transaction; the last one drops the
// old bucket and records storeFormat. Why move it rather than fold the log
// again, as for other older formats: the ledger is the same in both, and
// reading keys in order is many times faster than folding a large log.
// A migration cut short leaves eventsFormat recorded, and the next open
// goes through the old keys again: putting a block again is a union.
func migrateIndex(db *bolt.DB) error {
	var from []byte // the first old key not yet moved; nil: the first of all
	for done := false; !done; {
		err := db.Update(func(tx *bolt.Tx) error {
			history, err := tx.CreateBucketIfNotExists(bucketHistory)
			if err != nil {
				return err
			}
			p, next := oldIndexChunk(tx.Bucket(bucketEvents).Cursor(), from)
			err = p.eachBlock(func(key []byte, block uint64, indices []uint64) error {
				return putBlock(history, key, block, indices)
			})
			if err != nil || next != nil {
				from = next
				return err
			}
			done = true
			if err := tx.DeleteBucket(bucketEvents); err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(keyFormat, storeFormat)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// oldIndexChunk reads up to indexChunk keys of the old index from the key
// from on (nil: from the first), and returns them grouped by term with the
// key to go on from (nil: there are no more). A key that is not of the
// old form is passed over: the index only proposes candidates.
func oldIndexChunk(c *bolt.Cursor, from []byte) (*postings, []byte) {
	k, _ := c.First()
	if from != nil {
		k, _ = c.Seek(from)
	}
	p := newPostings()
	for n := 0; k != nil && n < indexChunk; k, _ = c.Next() {
		if len(k) >= 10 && k[len(k)-9] == 0 {
			t := k[:len(k)-9]
			p.byTerm[string(t)] = append(p.byTerm[string(t)], binary.BigEndian.Uint64(k[len(k)-8:]))
		}
		n++
	}
	if k == nil {
		return p, nil
	}
	return p, bytes.Clone(k)
}
