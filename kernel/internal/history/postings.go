package history

import (
	"bytes"
	"encoding/binary"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The history index on disk: one key per term and block of the log,
// blockKey(term, block), whose value lists the log indices of the term's
// events in that block (encodeBlock). Why blocks rather than a key per
// term and event: the kernel persists what it folded every second, and a
// key per event put tens of thousands of keys into bbolt each time (a
// seek, a node split now and then, and a copy of every key of the nodes
// it touched): 3% of annald's CPU at 512 governed agents, and some 30
// bytes of state file per event and term. A block is one key per term
// and persist, a byte or two per event.

// indexBlock is how many consecutive log indices one key of a term
// covers. Why 1<<14: an agent busy at 40 actions a second among 20,000
// a second has its events of one persist in one or two blocks; and a
// page reads at most one block's worth (16 KiB) before its first event.
const indexBlock = 1 << 14

// blockKey is term || 0x00 || big-endian block number: a term's keys sort
// by block. Terms never hold 0x00 (ids, kinds and types are validated).
func blockKey(t []byte, block uint64) []byte {
	k := append(append(make([]byte, 0, len(t)+9), t...), 0)
	return binary.BigEndian.AppendUint64(k, block)
}

// encodeBlock appends to dst the value of a block that holds indices,
// ascending and each in block: each index as a uvarint, the first less
// the block's first index, every other less the index before it.
func encodeBlock(dst []byte, block uint64, indices []uint64) []byte {
	prev := block * indexBlock
	for j, i := range indices {
		if j > 0 {
			prev++ // deltas after the first are at least 1: store them less 1
		}
		dst = binary.AppendUvarint(dst, i-prev)
		prev = i
	}
	return dst
}

// decodeBlock appends to dst the indices a block's value holds, ascending.
// A value that is damaged (a delta that runs past the block, a varint cut
// short) yields what comes before the damage: the index only proposes
// candidates, and a damaged one may hide events but never show another.
func decodeBlock(dst []uint64, block uint64, value []byte) []uint64 {
	first, end := block*indexBlock, (block+1)*indexBlock
	i, started := first, false
	for len(value) > 0 {
		d, n := binary.Uvarint(value)
		if n <= 0 {
			return dst
		}
		value = value[n:]
		room := end - i // > 0: i is in the block
		if started {
			room-- // the delta is stored less 1
		}
		if d >= room {
			return dst
		}
		if started {
			d++
		}
		i += d
		dst = append(dst, i)
		started = true
	}
	return dst
}

// postings are history index entries grouped by term: each term and the
// log indices of the events it indexes. Only the terms are sorted; the
// indices of one term arrive in log order (a rebuild, a persist), and are
// sorted only when they did not.
type postings struct {
	byTerm map[string][]uint64
	// indices counts what add recorded, so that a rebuild hands over a
	// bounded amount at a time.
	indices int
}

func newPostings() *postings { return &postings{byTerm: map[string][]uint64{}} }

// add records the terms of the event at index.
func (p *postings) add(index uint64, terms [][]byte) {
	for _, t := range terms {
		p.byTerm[string(t)] = append(p.byTerm[string(t)], index)
	}
	p.indices += len(terms)
}

// postingsOf groups the terms of index.
func postingsOf(index []IndexedEvent) *postings {
	p := newPostings()
	for _, ie := range index {
		p.add(ie.Index, ie.Terms)
	}
	return p
}

// eachBlock calls put with every block's key and the indices p holds in
// it, ascending and each once, in ascending order of the keys (the order
// of bytes.Compare: a term never holds 0x00, so a term sorts before any
// longer term it begins). key and indices are valid only during the call.
func (p *postings) eachBlock(put func(key []byte, block uint64, indices []uint64) error) error {
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
		indices = slices.Compact(indices)
		key = append(append(key[:0], t...), 0)
		prefix := len(key)
		for len(indices) > 0 {
			block := indices[0] / indexBlock
			n := 1
			for n < len(indices) && indices[n]/indexBlock == block {
				n++
			}
			key = binary.BigEndian.AppendUint64(key[:prefix], block)
			if err := put(key, block, indices[:n]); err != nil {
				return err
			}
			indices = indices[n:]
		}
	}
	return nil
}

// putBlock adds indices (ascending, each in block) to the block of key in
// b: the value becomes the union of what it held and indices. Why a union:
// after a crash the kernel folds again what it had indexed but not yet
// recorded as folded, and puts the same indices once more; a rebuild may
// hand over one block in two parts.
func putBlock(b *bolt.Bucket, key []byte, block uint64, indices []uint64) error {
	held := b.Get(key)
	var value []byte
	if held == nil {
		value = encodeBlock(make([]byte, 0, 2*len(indices)), block, indices)
	} else {
		had := decodeBlock(make([]uint64, 0, len(held)), block, held)
		// The value held is rewritten whole: damage past its last index
		// must not be kept. The new indices mostly follow the block's, and
		// then need no sort.
		union := append(had, indices...)
		if len(had) == 0 || had[len(had)-1] >= indices[0] {
			union = slices.Compact(slices.Sorted(slices.Values(union)))
		}
		value = encodeBlock(make([]byte, 0, len(held)+2*len(indices)), block, union)
		if bytes.Equal(value, held) {
			return nil
		}
	}
	// bbolt keeps value, not a copy, until the transaction commits: it is
	// made anew for every put.
	return b.Put(key, value)
}

// writeIndex adds the history index entries of p, in ascending order of
// their keys, indexChunk indices a transaction.
func (s *Store) writeIndex(p *postings) error {
	var tx *bolt.Tx
	var b *bolt.Bucket
	n := 0
	err := p.eachBlock(func(key []byte, block uint64, indices []uint64) error {
		if tx == nil {
			var err error
			if tx, err = s.DB.Begin(true); err != nil {
				return err
			}
			b = tx.Bucket(bucketHistory)
			b.FillPercent = 0.9 // keys arrive in order within each term: fill pages
		}
		if err := putBlock(b, key, block, indices); err != nil {
			return err
		}
		if n += len(indices); n >= indexChunk {
			n = 0
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

// indexIn adds the history index entries of p in tx, which is a write
// transaction.
func indexIn(tx *bolt.Tx, p *postings) error { return putBlocks(tx.Bucket(bucketHistory), p) }

// putBlocks adds the history index entries of p to b, the history
// bucket of a write transaction.
func putBlocks(b *bolt.Bucket, p *postings) error {
	return p.eachBlock(func(key []byte, block uint64, indices []uint64) error {
		return putBlock(b, key, block, indices)
	})
}
