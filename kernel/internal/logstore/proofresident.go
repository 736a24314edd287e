package logstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/tessera/api/layout"
)

// residentProofs builds inclusion and consistency proofs of any leaf of
// the log at a cost that does not grow with the log: what a proof needs of
// its full tiles stays in memory, in a form small enough to keep for every
// tile of a log of tens of millions of entries.
//
// A proof of leaf i needs at most 8 nodes of the level-0 tile holding i,
// one per node level 0..7, and nodes of the tiles of levels ≥ 1 above it.
//
//   - Full tiles of levels ≥ 1 (one per 65,536 entries, 16 KiB with every
//     node hashed: 2.4 MiB for 10M entries) are kept whole, up to
//     maxUpperTiles (64 MiB, a log of 268M entries); past it, the LRU.
//   - Of a full level-0 tile, only its nodes of levels 5..7 are kept (14
//     hashes, 448 bytes: 1.75 bytes an entry, 17.5 MiB for 10M), up to
//     maxLeafTops tiles (28 MiB, a log of 16.7M entries, and 256 KiB of
//     slot states from the start); past it they are
//     hashed for each proof, from the tile (about 250 hashes). A proof's
//     nodes of levels 0..4 are hashed from the 32 leaf hashes under them
//     (at most 26 hashes), from the tile read once per proof: one 8 KiB
//     read, which the page cache serves.
//   - Partial tiles (the log's right edge, a new one at each size) go to
//     the LRU, which keeps them hashed.
//
// The first proof asked starts one goroutine that hashes the top of every
// full level-0 tile of the log at that size (about 30 µs a tile: 1.2 s of
// one core for 10M entries), so that a server does not spend its first
// hundred thousand proofs of random leaves finding them one by one; stop
// ends it. Random leaves across the whole log then cost one tile read and
// a few dozen hashes each, where the LRU alone missed, read three tiles and
// hashed up to 255 nodes in each. Tiles never change once full, so
// nothing kept is ever stale. What is kept for the whole log is kept
// outside the Go heap (residentStore), so that it costs RSS its own bytes
// and not a heap goal raised by several times them. Safe for concurrent
// use.
type residentProofs struct {
	read func(ctx context.Context, level, index uint64, p uint8) ([]byte, error)
	// readChunk, if set, reads n bytes at off of full level-0 tile index
	// (os.ErrNotExist if it is not there): for a log in a data folder, a
	// proof then reads 1 KiB of the tile it needs, in three system calls.
	readChunk func(index uint64, off, n int) ([]byte, error)
	lru       *proofTiles

	// Lookups take no lock (64 clients asking proofs on two cores made a
	// read lock's shared counter the hottest line of upperNode).
	upper sync.Map // proofTileKey → *proofTile, its nodes in store
	// store holds the leaf tops and the upper tiles' nodes, outside the
	// Go heap (residentstore.go).
	store *residentStore

	warmOnce   sync.Once
	warmCtx    context.Context
	warmCancel context.CancelFunc
	warmDone   sync.WaitGroup
}

const (
	// maxUpperTiles bounds the full tiles of levels ≥ 1 kept whole.
	maxUpperTiles = 4096
	// maxLeafTops bounds the level-0 tiles whose top nodes are kept.
	maxLeafTops = 1 << 16
	// leafTopLevel is the lowest node level of a level-0 tile kept.
	leafTopLevel = 5
	// partialLRUTiles bounds the LRU of partial tiles and of tiles past
	// the bounds above.
	partialLRUTiles = 256
)

// leafTop holds the nodes of levels leafTopLevel..7 of a full level-0
// tile: 8, then 4, then 2.
type leafTop [14][sha256.Size]byte

// leafTopOffset is where node level k (leafTopLevel..7) starts in a
// leafTop.
func leafTopOffset(k uint) int {
	return 16 - (1 << (layout.TileHeight - k + 1))
}

func newResidentProofs(read func(ctx context.Context, level, index uint64, p uint8) ([]byte, error)) *residentProofs {
	ctx, cancel := context.WithCancel(context.Background())
	store, release := newResidentStore()
	r := &residentProofs{read: read, lru: newProofTiles(read, partialLRUTiles), store: store,
		warmCtx: ctx, warmCancel: cancel}
	runtime.AddCleanup(r, func(release func()) { release() }, release)
	return r
}

// warm starts, once, the goroutine that hashes the tops of the full
// level-0 tiles of the log of size.
func (r *residentProofs) warm(size uint64) {
	r.warmOnce.Do(func() {
		r.warmDone.Add(1)
		go func() {
			defer r.warmDone.Done()
			for i := range min(size/layout.TileWidth, maxLeafTops) {
				if r.warmCtx.Err() != nil {
					return
				}
				if _, err := r.leafTop(r.warmCtx, i, r.readLeaves); err != nil {
					return // proofs will read it, and say what is wrong
				}
			}
		}()
	})
}

// stop ends the goroutine of warm and waits for it.
func (r *residentProofs) stop() {
	r.warmOnce.Do(func() {}) // none starts after this
	r.warmCancel()
	r.warmDone.Wait()
}

// readLeaves reads the leaf hashes of full level-0 tile index.
func (r *residentProofs) readLeaves(ctx context.Context, index uint64) ([]byte, error) {
	raw, err := r.read(ctx, 0, index, 0)
	if err != nil {
		return nil, err
	}
	if len(raw) < layout.TileWidth*sha256.Size {
		return nil, fmt.Errorf("tile 0/%d holds %d bytes, want %d", index, len(raw), layout.TileWidth*sha256.Size)
	}
	return raw, nil
}

// inclusion returns the RFC 6962 audit path of leaf index in the tree of
// size.
func (r *residentProofs) inclusion(ctx context.Context, index, size uint64) ([][sha256.Size]byte, error) {
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, err
	}
	r.warm(size)
	return fetchProof(ctx, nodes, size, r.nodeOnce())
}

// consistency returns the RFC 6962 consistency proof from old to size.
func (r *residentProofs) consistency(ctx context.Context, old, size uint64) ([][sha256.Size]byte, error) {
	nodes, err := proof.Consistency(old, size)
	if err != nil {
		return nil, err
	}
	return fetchProof(ctx, nodes, size, r.nodeOnce())
}

// nodeOnce returns the node lookup of one proof: the leaves it reads of
// a level-0 tile are read once for all of its nodes.
func (r *residentProofs) nodeOnce() func(ctx context.Context, id compact.NodeID, size uint64) ([]byte, error) {
	reads := &leafReads{r: r}
	return func(ctx context.Context, id compact.NodeID, size uint64) ([]byte, error) {
		// The hashes below are copied out of r.store, which lives as
		// long as r does.
		defer runtime.KeepAlive(r)
		tileLevel, tileIndex, nodeLevel, nodeIndex := layout.NodeCoordsToTileAddress(uint64(id.Level), id.Index)
		switch {
		case layout.PartialTileSize(tileLevel, tileIndex, size) != 0:
			return r.lru.node(ctx, id, size)
		case tileLevel > 0:
			return r.upperNode(ctx, id, size, tileLevel, tileIndex, nodeLevel, nodeIndex)
		case nodeLevel >= leafTopLevel:
			top, err := r.leafTop(ctx, tileIndex, reads.tile)
			if err != nil {
				return nil, err
			}
			h := top[leafTopOffset(nodeLevel)+int(nodeIndex)]
			return h[:], nil
		default:
			first := nodeIndex << nodeLevel
			raw, err := reads.chunk(ctx, tileIndex, first/leafChunk)
			if err != nil {
				return nil, err
			}
			h := subtreeHash(raw, first%leafChunk, nodeLevel)
			return h[:], nil
		}
	}
}

// leafChunk is how many leaf hashes of a level-0 tile sit under one node
// of level leafTopLevel: all a proof's nodes below the kept top need.
const leafChunk = 1 << leafTopLevel

// leafChunkBytes is the size of leafChunk leaf hashes.
const leafChunkBytes = leafChunk * sha256.Size

// leafReads reads the leaves of full level-0 tiles for one proof, each
// once: a whole tile when a top must be hashed, else only the chunk of
// leafChunk leaves under a kept node (1 KiB of the 8 KiB tile).
type leafReads struct {
	r         *residentProofs
	tileIndex uint64
	whole     []byte // the leaves of tile tileIndex, if read whole
	chunkAt   [2]uint64
	chunkRaw  []byte // the leaves of chunk chunkAt[1] of tile chunkAt[0]
}

// tile returns the leaves of full level-0 tile index.
func (lr *leafReads) tile(ctx context.Context, index uint64) ([]byte, error) {
	if lr.whole != nil && lr.tileIndex == index {
		return lr.whole, nil
	}
	raw, err := lr.r.readLeaves(ctx, index)
	if err != nil {
		return nil, err
	}
	lr.tileIndex, lr.whole = index, raw
	return raw, nil
}

// chunk returns the leaves of chunk c (leafChunk leaves) of full level-0
// tile index: from the tile if it was read whole, else read alone.
func (lr *leafReads) chunk(ctx context.Context, index, c uint64) ([]byte, error) {
	switch {
	case lr.r.readChunk == nil || (lr.whole != nil && lr.tileIndex == index):
		return lr.chunkOfWhole(ctx, index, c)
	case lr.chunkRaw != nil && lr.chunkAt == [2]uint64{index, c}:
		return lr.chunkRaw, nil
	}
	raw, err := lr.r.readChunk(index, int(c)*leafChunkBytes, leafChunkBytes)
	if errors.Is(err, os.ErrNotExist) {
		// Not in the data folder as a full tile: the reader knows where
		// else to find it (Log.ReadTile).
		return lr.chunkOfWhole(ctx, index, c)
	}
	if err != nil {
		return nil, err
	}
	lr.chunkAt, lr.chunkRaw = [2]uint64{index, c}, raw
	return raw, nil
}

// chunkOfWhole is chunk c of full level-0 tile index, read whole (once).
func (lr *leafReads) chunkOfWhole(ctx context.Context, index, c uint64) ([]byte, error) {
	raw, err := lr.tile(ctx, index)
	if err != nil {
		return nil, err
	}
	return raw[c*leafChunkBytes : (c+1)*leafChunkBytes], nil
}

// upperNode is node id of the full tile (tileLevel ≥ 1, tileIndex), kept
// whole once read, or from the LRU once maxUpperTiles are kept.
func (r *residentProofs) upperNode(ctx context.Context, id compact.NodeID, size, tileLevel, tileIndex uint64, nodeLevel uint, nodeIndex uint64) ([]byte, error) {
	key := proofTileKey{level: tileLevel, index: tileIndex}
	var t *proofTile
	if v, ok := r.upper.Load(key); ok {
		t = v.(*proofTile)
	} else {
		if r.store.upperFull() {
			return r.lru.node(ctx, id, size)
		}
		// Read past the LRU: the copy kept in r.store is the one used.
		var err error
		if t, err = r.lru.readHashed(ctx, key); err != nil {
			return nil, err
		}
		if kept := r.store.keepUpper(t); kept != nil {
			v, _ := r.upper.LoadOrStore(key, kept)
			t = v.(*proofTile)
		}
	}
	h := t.nodes[nodeLevel][nodeIndex]
	return h[:], nil
}

// leafTop is the top of full level-0 tile index, hashed from its leaves
// (read with leaves) the first time and kept if index < maxLeafTops. The
// caller keeps r reachable while it reads the answer (it may be in
// r.store).
func (r *residentProofs) leafTop(ctx context.Context, index uint64, leaves func(context.Context, uint64) ([]byte, error)) (*leafTop, error) {
	kept := index < maxLeafTops
	if kept {
		if top := r.store.top(index); top != nil {
			return top, nil
		}
	}
	raw, err := leaves(ctx, index)
	if err != nil {
		return nil, err
	}
	top := new(leafTop)
	for k := uint(leafTopLevel); k < layout.TileHeight; k++ {
		for j := range 1 << (layout.TileHeight - k) {
			top[leafTopOffset(k)+j] = subtreeHash(raw, uint64(j)<<k, k)
		}
	}
	if kept {
		top = r.store.keepTop(index, top)
	}
	return top, nil
}

// subtreeHash is the hash of the 2^level leaves of raw (a tile's bottom
// row, 32 bytes a hash) from leaf first.
func subtreeHash(raw []byte, first uint64, level uint) [sha256.Size]byte {
	var row [layout.TileWidth / 2][sha256.Size]byte
	n := 1 << level
	if n == 1 {
		return [sha256.Size]byte(raw[first*sha256.Size:])
	}
	// The first pairs are hashed straight from raw, then the row is
	// halved in place.
	for i := range n / 2 {
		at := (first + 2*uint64(i)) * sha256.Size
		row[i] = hashChildren((*[sha256.Size]byte)(raw[at:]), (*[sha256.Size]byte)(raw[at+sha256.Size:]))
	}
	for n /= 2; n > 1; n /= 2 {
		for i := range n / 2 {
			row[i] = hashChildren(&row[2*i], &row[2*i+1])
		}
	}
	return row[0]
}
