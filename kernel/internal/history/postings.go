package history

import (
	"encoding/binary"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// postings are history index keys grouped by term: each term and the log
// indices of the events it indexes. Why not a sorted list of keys: a
// rebuild indexes a whole log, and sorting its millions of keys cost as
// much as folding it; grouped, only the terms are sorted (the indices of
// one term arrive in log order), and each key is made once, as it is put.
type postings struct {
	byTerm map[string][]uint64
	keys   int
}

func newPostings() *postings { return &postings{byTerm: map[string][]uint64{}} }

// add records the terms of the event at index.
func (p *postings) add(index uint64, terms [][]byte) {
	for _, t := range terms {
		p.byTerm[string(t)] = append(p.byTerm[string(t)], index)
	}
	p.keys += len(terms)
}

// postingsOf groups the terms of index.
func postingsOf(index []IndexedEvent) *postings {
	p := newPostings()
	for _, ie := range index {
		p.add(ie.Index, ie.Terms)
	}
	return p
}

// each calls put with every key (indexKey) in ascending order, the same
// order as bytes.Compare of the keys: a term never holds 0x00, so a term
// sorts before any longer term it begins. The key is valid only during
// the call.
func (p *postings) each(put func(key []byte) error) error {
	terms := make([]string, 0, len(p.byTerm))
	for t := range p.byTerm {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	var key []byte
	for _, t := range terms {
		indices := p.byTerm[t]
		if !slices.IsSorted(indices) {
			slices.Sort(indices)
		}
		key = append(append(key[:0], t...), 0)
		prefix := len(key)
		for _, i := range indices {
			key = binary.BigEndian.AppendUint64(key[:prefix], i)
			if err := put(key); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeIndex puts the history index keys of p, in ascending order,
// indexChunk keys a transaction (bbolt copies each key it is given).
func (s *Store) writeIndex(p *postings) error {
	var tx *bolt.Tx
	var b *bolt.Bucket
	n := 0
	err := p.each(func(key []byte) error {
		if tx == nil {
			var err error
			if tx, err = s.DB.Begin(true); err != nil {
				return err
			}
			b = tx.Bucket(bucketEvents)
			b.FillPercent = 0.9 // keys arrive in order within each term: fill pages
		}
		if err := b.Put(key, nil); err != nil {
			return err
		}
		if n++; n%indexChunk == 0 {
			err := tx.Commit()
			tx = nil
			return err
		}
		return nil
	})
	if tx == nil {
		return err
	}
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
