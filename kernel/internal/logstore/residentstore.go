package logstore

import (
	"crypto/sha256"
	"sync/atomic"
	"unsafe"
)

// residentStore holds what residentProofs keeps for the whole log, the
// tops of full level-0 tiles and the full tiles of levels ≥ 1, outside
// the Go heap.
//
// Why: what it holds grows with the log (about 2 bytes an entry), and the
// Go collector sets its heap goal from the live heap, so bytes kept there
// cost several times themselves in RSS: Go's default goal is twice the
// live heap, and annald's (internal/gcgoal) up to eleven times a small
// one. In the heap, the 4 MB of hashes of a 2M-entry log raised annald's
// heap goal by 33 MB, and its RSS followed (153 → 188 MiB from 270K to 2M
// entries; 176 → 353 MiB from 400K to 10.2M). Outside it they cost their
// own bytes, once written, and the heap and its goal follow the load, not
// the log. A fixed region is reserved for the bounds (maxLeafTops and
// maxUpperTiles: 92 MiB of address space), of which only the pages written
// become resident. Being outside the heap, they are outside GOMEMLIMIT's
// count as well: an operator setting one leaves room for them.
//
// The hashes hold no pointers and never change once written. Each slot is
// written once, by the one writer that claims it, before it is published
// (a leaf top's state, an upper tile's entry in residentProofs.upper), so
// readers take no lock. The region is given back when the residentProofs
// that owns it is collected (runtime.AddCleanup); readers keep it
// reachable while they read (runtime.KeepAlive).
type residentStore struct {
	mem []byte // maxLeafTops leaf tops, then maxUpperTiles upper tiles
	// topState is a leaf top's slot state: slotEmpty, slotWriting or
	// slotKept.
	topState []atomic.Uint32
	// upperClaimed counts the upper tile slots claimed, in order.
	upperClaimed atomic.Int64
	// topsKept counts the leaf tops kept.
	topsKept atomic.Int64
}

const (
	slotEmpty uint32 = iota
	slotWriting
	slotKept
)

const (
	// leafTopBytes is a leafTop's size: 14 hashes.
	leafTopBytes = int(unsafe.Sizeof(leafTop{}))
	// upperTileHashes is the nodes of a full tile, levels 0..8.
	upperTileHashes = 2*256 - 1
	upperTileBytes  = upperTileHashes * sha256.Size
	leafTopsBytes   = maxLeafTops * leafTopBytes
)

// newResidentStore reserves the store's region; release gives it back.
// Where no region can be mapped (no anonymous maps, or the address space
// is limited), the store keeps nothing, and proofs hash from the tiles
// and go through the LRU: slower, never wrong, and the heap does not
// take 92 MiB at once.
func newResidentStore() (s *residentStore, release func()) {
	mem, release, err := mapOffHeap(leafTopsBytes + maxUpperTiles*upperTileBytes)
	if err != nil {
		return &residentStore{}, func() {}
	}
	return &residentStore{mem: mem, topState: make([]atomic.Uint32, maxLeafTops)}, release
}

// top is the kept top of level-0 tile index (< maxLeafTops), or nil.
func (s *residentStore) top(index uint64) *leafTop {
	if s.mem == nil || s.topState[index].Load() != slotKept {
		return nil
	}
	return s.topAt(index)
}

func (s *residentStore) topAt(index uint64) *leafTop {
	return (*leafTop)(unsafe.Pointer(&s.mem[index*uint64(leafTopBytes)]))
}

// keepTop keeps top as level-0 tile index's (< maxLeafTops) and returns
// the kept copy; if another writer has claimed the slot, it returns top.
func (s *residentStore) keepTop(index uint64, top *leafTop) *leafTop {
	if s.mem == nil || !s.topState[index].CompareAndSwap(slotEmpty, slotWriting) {
		return top
	}
	kept := s.topAt(index)
	*kept = *top
	s.topState[index].Store(slotKept)
	s.topsKept.Add(1)
	return kept
}

// upperFull says whether every upper tile slot is taken.
func (s *residentStore) upperFull() bool {
	return s.mem == nil || s.upperClaimed.Load() >= maxUpperTiles
}

// keepUpper copies the full tile t (of level ≥ 1) into the next free
// slot and returns the copy, which the caller publishes; nil when every
// slot is taken. A slot whose copy loses the race to be published stays
// unused: upper tiles are few (one per 65,536 entries), and the bound
// still holds.
func (s *residentStore) keepUpper(t *proofTile) *proofTile {
	n := 0
	for _, level := range t.nodes {
		n += len(level)
	}
	if n > upperTileHashes || s.upperFull() {
		return nil
	}
	slot := s.upperClaimed.Add(1) - 1
	if slot >= maxUpperTiles {
		return nil
	}
	off := leafTopsBytes + int(slot)*upperTileBytes
	kept := &proofTile{key: t.key}
	for k, level := range t.nodes {
		if len(level) == 0 {
			continue
		}
		kept.nodes[k] = unsafe.Slice((*[sha256.Size]byte)(unsafe.Pointer(&s.mem[off])), len(level))
		copy(kept.nodes[k], level)
		off += len(level) * sha256.Size
	}
	return kept
}
