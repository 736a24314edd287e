package logstore

import (
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
)

// proofTiles builds inclusion and consistency proofs from the log's hash
// tiles, keeping the tiles it read with every node inside them hashed.
// A tile of a given width never changes (the log only grows: a wider
// partial tile, or the full one, is another file), so what is cached is
// never stale, and a proof costs lookups instead of reading three tiles
// and hashing up to 255 nodes in each (Tessera's ProofBuilder, made anew
// per request). Safe for concurrent use; the cache holds at most capacity
// tiles (16 KiB each), least recently used out first.
//
// On its own (capacity maxProofTiles) it was the log's proof builder until
// random leaves of a large log missed it (the baseline of
// BenchmarkInclusionProof); residentProofs now keeps what a proof of any
// leaf needs and leaves it the partial tiles of the log's right edge and
// what lies past its own bounds.
type proofTiles struct {
	read     func(ctx context.Context, level, index uint64, p uint8) ([]byte, error)
	capacity int

	mu    sync.Mutex
	tiles map[proofTileKey]*list.Element
	order *list.List // front: most recently used
}

// maxProofTiles was the bound of the LRU alone: 64 MiB of tiles, every
// level-0 tile of a log of a million entries and those above.
const maxProofTiles = 4096

type proofTileKey struct {
	level, index uint64
	width        uint8 // 0: full
}

type proofTile struct {
	key proofTileKey
	// nodes[k] are the hashes of the tile's level-k subtrees, k = 0..8.
	nodes [9][][sha256.Size]byte
}

func newProofTiles(read func(ctx context.Context, level, index uint64, p uint8) ([]byte, error), capacity int) *proofTiles {
	return &proofTiles{read: read, capacity: capacity, tiles: map[proofTileKey]*list.Element{}, order: list.New()}
}

// inclusion returns the RFC 6962 audit path of leaf index in the tree of
// size.
func (t *proofTiles) inclusion(ctx context.Context, index, size uint64) ([][sha256.Size]byte, error) {
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, err
	}
	return fetchProof(ctx, nodes, size, t.node)
}

// consistency returns the RFC 6962 consistency proof from old to size.
func (t *proofTiles) consistency(ctx context.Context, old, size uint64) ([][sha256.Size]byte, error) {
	nodes, err := proof.Consistency(old, size)
	if err != nil {
		return nil, err
	}
	return fetchProof(ctx, nodes, size, t.node)
}

// fetchProof looks up the nodes of a proof with node and hashes those the
// proof rehashes.
func fetchProof(ctx context.Context, nodes proof.Nodes, size uint64, node func(ctx context.Context, id compact.NodeID, size uint64) ([]byte, error)) ([][sha256.Size]byte, error) {
	hashes := make([][]byte, 0, len(nodes.IDs))
	for _, id := range nodes.IDs {
		h, err := node(ctx, id, size)
		if err != nil {
			return nil, fmt.Errorf("proof node %d/%d: %w", id.Level, id.Index, err)
		}
		hashes = append(hashes, h)
	}
	hashes, err := nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
	if err != nil {
		return nil, err
	}
	return ToHashes(hashes)
}

// node returns the hash of a complete subtree of the tree of size.
func (t *proofTiles) node(ctx context.Context, id compact.NodeID, size uint64) ([]byte, error) {
	tileLevel, tileIndex, nodeLevel, nodeIndex := layout.NodeCoordsToTileAddress(uint64(id.Level), id.Index)
	tile, err := t.tile(ctx, tileLevel, tileIndex, layout.PartialTileSize(tileLevel, tileIndex, size))
	if err != nil {
		return nil, err
	}
	level := tile.nodes[nodeLevel]
	if nodeIndex >= uint64(len(level)) {
		return nil, fmt.Errorf("tile %d/%d holds %d nodes at level %d, not node %d", tileLevel, tileIndex, len(level), nodeLevel, nodeIndex)
	}
	h := level[nodeIndex]
	return h[:], nil
}

// tile returns tile (level, index) of width p (0: full), read and hashed
// once.
func (t *proofTiles) tile(ctx context.Context, level, index uint64, p uint8) (*proofTile, error) {
	key := proofTileKey{level, index, p}
	t.mu.Lock()
	if e, ok := t.tiles[key]; ok {
		t.order.MoveToFront(e)
		t.mu.Unlock()
		return e.Value.(*proofTile), nil
	}
	t.mu.Unlock()
	pt, err := t.readHashed(ctx, key)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.tiles[key]; ok { // read meanwhile by another request
		return e.Value.(*proofTile), nil
	}
	t.tiles[key] = t.order.PushFront(pt)
	for t.order.Len() > t.capacity {
		last := t.order.Back()
		t.order.Remove(last)
		delete(t.tiles, last.Value.(*proofTile).key)
	}
	return pt, nil
}

// readHashed reads the tile of key and hashes its nodes, without keeping
// it.
func (t *proofTiles) readHashed(ctx context.Context, key proofTileKey) (*proofTile, error) {
	raw, err := t.read(ctx, key.level, key.index, key.width)
	if err != nil {
		return nil, err
	}
	var ht api.HashTile
	if err := ht.UnmarshalText(raw); err != nil {
		return nil, fmt.Errorf("tile %d/%d: %w", key.level, key.index, err)
	}
	want := int(key.width)
	if key.width == 0 {
		want = layout.TileWidth
	}
	if len(ht.Nodes) < want {
		return nil, fmt.Errorf("tile %d/%d holds %d hashes, want %d", key.level, key.index, len(ht.Nodes), want)
	}
	return hashTile(key, ht.Nodes[:want]), nil
}

// hashTile is the tile of key whose bottom row is leaves (32-byte hashes,
// as UnmarshalText cuts them), with every node above them hashed.
func hashTile(key proofTileKey, leaves [][]byte) *proofTile {
	pt := &proofTile{key: key}
	pt.nodes[0] = make([][sha256.Size]byte, len(leaves))
	for i, n := range leaves {
		pt.nodes[0][i] = [sha256.Size]byte(n)
	}
	for k := 1; k < len(pt.nodes); k++ {
		below := pt.nodes[k-1]
		pt.nodes[k] = make([][sha256.Size]byte, len(below)/2)
		for i := range pt.nodes[k] {
			pt.nodes[k][i] = hashChildren(&below[2*i], &below[2*i+1])
		}
	}
	return pt
}

// hashChildren is RFC 6962's hash of an inner node, without the
// allocation of rfc6962.DefaultHasher.HashChildren: a proof of a leaf of
// a level-0 tile not hashed before hashes a few dozen of them.
func hashChildren(l, r *[sha256.Size]byte) [sha256.Size]byte {
	var b [1 + 2*sha256.Size]byte
	b[0] = rfc6962.RFC6962NodeHashPrefix
	copy(b[1:], l[:])
	copy(b[1+sha256.Size:], r[:])
	return sha256.Sum256(b[:])
}
