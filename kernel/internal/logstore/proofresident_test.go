package logstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api/layout"
)

// synthLog is the hash tiles of a log of size leaves, built in a moment
// for a log of ten million: its level-0 tiles repeat a few distinct ones
// (tile t is distinct[t%len(distinct)]), and the levels above are hashed
// from them as a log's are. Proof builders key their tiles by address,
// not content, so they miss and hit as on a log of distinct tiles.
type synthLog struct {
	size     uint64
	distinct [][]byte              // level-0 tiles, 256 hashes each
	rows     [][][sha256.Size]byte // rows[k]: the full subtrees of tree level 8k, k ≥ 1
	reads    atomic.Int64
	// chunkReads counts readChunk's reads.
	chunkReads atomic.Int64
}

func newSynthLog(size uint64) *synthLog {
	s := &synthLog{size: size, rows: make([][][sha256.Size]byte, 1)}
	rng := rand.NewChaCha8([32]byte{41})
	roots := make([][sha256.Size]byte, 61)
	for i := range roots {
		tile := make([]byte, layout.TileWidth*sha256.Size)
		rng.Read(tile)
		s.distinct = append(s.distinct, tile)
		roots[i] = subtreeHash(tile, 0, layout.TileHeight)
	}
	row := make([][sha256.Size]byte, size/layout.TileWidth)
	for t := range row {
		row[t] = roots[t%len(roots)]
	}
	for len(row) > 0 {
		s.rows = append(s.rows, row)
		above := make([][sha256.Size]byte, len(row)/layout.TileWidth)
		for t := range above {
			above[t] = rowHash(row[t*layout.TileWidth : (t+1)*layout.TileWidth])
		}
		row = above
	}
	return s
}

// rowHash is the root of a full row of 256 hashes.
func rowHash(row [][sha256.Size]byte) [sha256.Size]byte {
	raw := make([]byte, 0, len(row)*sha256.Size)
	for _, h := range row {
		raw = append(raw, h[:]...)
	}
	return subtreeHash(raw, 0, layout.TileHeight)
}

func (s *synthLog) leaf(i uint64) []byte {
	t := s.distinct[(i/layout.TileWidth)%uint64(len(s.distinct))]
	at := (i % layout.TileWidth) * sha256.Size
	return t[at : at+sha256.Size]
}

// read serves tile (level, index) of width p as a log's storage does: a
// copy, as read from a file.
func (s *synthLog) read(_ context.Context, level, index uint64, p uint8) ([]byte, error) {
	s.reads.Add(1)
	w := uint64(p)
	if w == 0 {
		w = layout.TileWidth
	}
	if level == 0 {
		return bytes.Clone(s.distinct[index%uint64(len(s.distinct))][:w*sha256.Size]), nil
	}
	row := s.rows[level]
	if (index+1)*layout.TileWidth > uint64(len(row)) && (index*layout.TileWidth+w) > uint64(len(row)) {
		return nil, fmt.Errorf("tile %d/%d of width %d is past the log", level, index, w)
	}
	out := make([]byte, 0, w*sha256.Size)
	for _, h := range row[index*layout.TileWidth : index*layout.TileWidth+w] {
		out = append(out, h[:]...)
	}
	return out, nil
}

// readChunk serves n bytes at off of full level-0 tile index, as
// leafChunkReader does from a file.
func (s *synthLog) readChunk(index uint64, off, n int) ([]byte, error) {
	s.chunkReads.Add(1)
	if (index+1)*layout.TileWidth > s.size {
		return nil, fmt.Errorf("tile 0/%d is not full: %w", index, os.ErrNotExist)
	}
	return bytes.Clone(s.distinct[index%uint64(len(s.distinct))][off : off+n]), nil
}

// node is the hash of the complete subtree (level, index).
func (s *synthLog) node(level uint, index uint64) [sha256.Size]byte {
	switch {
	case level == 0:
		return [sha256.Size]byte(s.leaf(index))
	case level%layout.TileHeight == 0:
		return s.rows[level/layout.TileHeight][index]
	}
	l, r := s.node(level-1, 2*index), s.node(level-1, 2*index+1)
	return hashChildren(&l, &r)
}

// root is the RFC 6962 root of the first size leaves: its perfect
// subtrees, largest first, folded from the right.
func (s *synthLog) root(size uint64) []byte {
	var subtrees [][sha256.Size]byte
	for start := uint64(0); start < size; {
		level := uint(bits.Len64(size-start) - 1)
		subtrees = append(subtrees, s.node(level, start>>level))
		start += 1 << level
	}
	acc := subtrees[len(subtrees)-1]
	for i := len(subtrees) - 2; i >= 0; i-- {
		acc = hashChildren(&subtrees[i], &acc)
	}
	return acc[:]
}

type proofBuilder interface {
	inclusion(ctx context.Context, index, size uint64) ([][sha256.Size]byte, error)
	consistency(ctx context.Context, old, size uint64) ([][sha256.Size]byte, error)
}

func slicesOf(p [][sha256.Size]byte) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i][:]
	}
	return out
}

// TestResidentProofs_VerifyAcrossTheLog: proofs of random leaves of a log
// with partial tiles at every level, from the resident builder and from
// the LRU alone, verify against the log's root, and so do consistency
// proofs; the second proof of a leaf reads one tile at most (its level-0
// tile), whatever the log's size.
func TestResidentProofs_VerifyAcrossTheLog(t *testing.T) {
	ctx := context.Background()
	const size = 3*layout.TileWidth*layout.TileWidth + 1234
	s := newSynthLog(size)
	root := s.root(size)
	chunked := newResidentProofs(s.read)
	chunked.readChunk = s.readChunk
	builders := map[string]proofBuilder{"resident": newResidentProofs(s.read), "lru": newProofTiles(s.read, maxProofTiles),
		"resident reading chunks": chunked}
	rng := rand.New(rand.NewPCG(41, 1))
	for name, b := range builders {
		for range 2000 {
			i := rng.Uint64N(size)
			p, err := b.inclusion(ctx, i, size)
			if err != nil {
				t.Fatalf("%s: inclusion %d: %v", name, i, err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, s.leaf(i), slicesOf(p), root); err != nil {
				t.Fatalf("%s: inclusion %d of %d does not verify: %v", name, i, size, err)
			}
			old := 1 + rng.Uint64N(size)
			c, err := b.consistency(ctx, old, size)
			if err != nil {
				t.Fatalf("%s: consistency %d: %v", name, old, err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old, size, slicesOf(c), s.root(old), root); err != nil {
				t.Fatalf("%s: consistency %d → %d does not verify: %v", name, old, size, err)
			}
		}
	}
	r := builders["resident"].(*residentProofs)
	r.warmDone.Wait()
	for _, i := range []uint64{0, 255, 70_000, size - 1300} {
		if _, err := r.inclusion(ctx, i, size); err != nil {
			t.Fatal(err)
		}
		before := s.reads.Load()
		if _, err := r.inclusion(ctx, i, size); err != nil {
			t.Fatal(err)
		}
		if got := s.reads.Load() - before; got > 1 {
			t.Errorf("the second proof of leaf %d read %d tiles, want at most 1", i, got)
		}
	}
	// Reading chunks, a warm proof of a leaf under a full tile reads one
	// chunk of it and no tile whole.
	chunked.warmDone.Wait()
	for _, i := range []uint64{0, 255, 70_000, size - 1300} {
		if _, err := chunked.inclusion(ctx, i, size); err != nil {
			t.Fatal(err)
		}
		reads, chunks := s.reads.Load(), s.chunkReads.Load()
		if _, err := chunked.inclusion(ctx, i, size); err != nil {
			t.Fatal(err)
		}
		if got, gotChunks := s.reads.Load()-reads, s.chunkReads.Load()-chunks; got != 0 || gotChunks != 1 {
			t.Errorf("the second proof of leaf %d read %d tiles and %d chunks, want 0 and 1", i, got, gotChunks)
		}
	}
}

// TestLeafChunkReader reads a part of a full level-0 tile in a data
// folder, says os.ErrNotExist for a tile not there, and refuses a tile
// shorter than the part asked.
func TestLeafChunkReader(t *testing.T) {
	root := t.TempDir()
	tile := make([]byte, layout.TileWidth*sha256.Size)
	rand.NewChaCha8([32]byte{7}).Read(tile)
	writeLeafTile(t, root, 1234, tile)
	writeLeafTile(t, root, 1235, tile[:100])
	read := leafChunkReader(root)
	got, err := read(1234, 3*1024, 1024)
	if err != nil || !bytes.Equal(got, tile[3*1024:4*1024]) {
		t.Fatalf("read chunk 3 = %x…, %v; want the tile's bytes 3072–4095", got[:min(8, len(got))], err)
	}
	if _, err := read(99, 0, 1024); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read of a missing tile: %v, want os.ErrNotExist", err)
	}
	if _, err := read(1235, 0, 1024); err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read of a short tile: %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestResidentProofs_WarmsEveryTile: the first proof starts the hashing of
// every full level-0 tile's top, so that a proof of any leaf, even of a
// tile no proof read before, reads one tile (its own level-0 tile) and
// hashes no tile whole; stop ends the warming.
func TestResidentProofs_WarmsEveryTile(t *testing.T) {
	ctx := context.Background()
	const size = layout.TileWidth*layout.TileWidth + 700
	s := newSynthLog(size)
	r := newResidentProofs(s.read)
	if _, err := r.inclusion(ctx, 0, size); err != nil {
		t.Fatal(err)
	}
	r.warmDone.Wait()
	for tile := range uint64(size / layout.TileWidth) {
		if r.store.top(tile) == nil {
			t.Fatalf("tile %d of %d not warmed", tile, size/layout.TileWidth)
		}
	}
	for _, i := range []uint64{1, 40_000, 65_535} {
		before := s.reads.Load()
		if _, err := r.inclusion(ctx, i, size); err != nil {
			t.Fatal(err)
		}
		if got := s.reads.Load() - before; got != 1 {
			t.Errorf("proof of leaf %d read %d tiles, want 1", i, got)
		}
	}
	stopped := newResidentProofs(s.read)
	stopped.stop()
	if _, err := stopped.inclusion(ctx, 0, size); err != nil {
		t.Fatal(err)
	}
	stopped.warmDone.Wait()
	warmed := 0
	for i := range uint64(maxLeafTops) {
		if stopped.store.top(i) != nil {
			warmed++
		}
	}
	if warmed > 1 {
		t.Errorf("a stopped builder warmed %d tiles", warmed)
	}
}

// TestResidentProofs_Concurrent: proofs asked at once, of leaves whose
// tiles no one read yet, all verify (run with -race: the tiles kept are
// shared).
func TestResidentProofs_Concurrent(t *testing.T) {
	ctx := context.Background()
	const size = 2*layout.TileWidth*layout.TileWidth + 99
	s := newSynthLog(size)
	root := s.root(size)
	r := newResidentProofs(s.read)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(41, uint64(w)))
			for range 300 {
				i := rng.Uint64N(size)
				p, err := r.inclusion(ctx, i, size)
				if err == nil {
					err = proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, s.leaf(i), slicesOf(p), root)
				}
				if err != nil {
					t.Errorf("leaf %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestSubtreeHash_MatchesRFC6962: the hash of a tile's subtree is the
// RFC 6962 root of its leaves.
func TestSubtreeHash_MatchesRFC6962(t *testing.T) {
	s := newSynthLog(layout.TileWidth)
	for _, level := range []uint{0, 1, 4, 8} {
		got := subtreeHash(s.distinct[0], 0, level)
		if want := s.root(1 << level); !bytes.Equal(got[:], want) {
			t.Errorf("level %d: %x, want %x", level, got, want)
		}
	}
}

// BenchmarkInclusionProof measures proofs of random leaves across the
// whole log, at 200K and 10M entries, with the resident builder and the
// LRU alone (the baseline), each warmed by one proof in every level-0
// tile first: what a server sees once it has served proofs for a while.
// Compare ns/op across sizes: the resident builder's should not grow.
func BenchmarkInclusionProof(b *testing.B) {
	ctx := context.Background()
	for _, size := range []uint64{200_000 + 77, 10_000_000 + 77} {
		s := newSynthLog(size)
		for _, name := range []string{"lru", "resident"} {
			var pb proofBuilder = newResidentProofs(s.read)
			if name == "lru" {
				pb = newProofTiles(s.read, maxProofTiles)
			}
			for i := uint64(0); i < size; i += layout.TileWidth {
				if _, err := pb.inclusion(ctx, i, size); err != nil {
					b.Fatal(err)
				}
			}
			if r, ok := pb.(*residentProofs); ok {
				r.warmDone.Wait()
			}
			b.Run(fmt.Sprintf("size=%d/%s", size, name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(41, 2))
				for b.Loop() {
					if _, err := pb.inclusion(ctx, rng.Uint64N(size), size); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestResidentProofs_KeptOutsideTheHeap: what residentProofs keeps for
// the whole log (the top of every level-0 tile, every full upper tile)
// does not grow the Go heap, whose live size sets the collector's goal
// and so annald's RSS (residentStore). In the heap, the tops of this 4M
// entry log's tiles and its upper tiles were 8 MiB (and upper tiles went
// through the LRU as well).
func TestResidentProofs_KeptOutsideTheHeap(t *testing.T) {
	ctx := context.Background()
	const tiles = 16384
	const size = tiles*layout.TileWidth + 17
	s := newSynthLog(size)
	root := s.root(size)
	r := newResidentProofs(s.read)
	defer r.stop()
	before := liveHeap()
	if _, err := r.inclusion(ctx, 0, size); err != nil {
		t.Fatal(err)
	}
	r.warmDone.Wait()
	for upper := uint64(0); upper < tiles/layout.TileWidth; upper++ {
		i := upper*layout.TileWidth*layout.TileWidth + 5
		p, err := r.inclusion(ctx, i, size)
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, s.leaf(i), slicesOf(p), root); err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
	}
	kept := 0
	for i := range uint64(tiles) {
		if r.store.top(i) != nil {
			kept++
		}
	}
	grew := int64(liveHeap()) - int64(before)
	t.Logf("%d tiles' tops and %d upper tiles kept; the live heap grew %d KiB", kept, r.store.upperClaimed.Load(), grew>>10)
	if kept != tiles || r.store.upperClaimed.Load() < tiles/layout.TileWidth {
		t.Fatalf("kept %d tops of %d tiles, %d upper tiles", kept, tiles, r.store.upperClaimed.Load())
	}
	// A few tiles read and hashed may still be in flight; 512 KiB is a
	// fifteenth of what was kept.
	if grew > 512<<10 {
		t.Fatalf("the live heap grew %d KiB keeping %d tiles' tops (%d KiB of hashes)", grew>>10, kept, kept*leafTopBytes>>10)
	}
}

// liveHeap is the heap a full collection finds live.
func liveHeap() uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// TestResidentProofs_WithoutARegion: where no region outside the heap
// can be mapped, the store keeps nothing and the proofs, hashed from the
// tiles and the LRU, still verify.
func TestResidentProofs_WithoutARegion(t *testing.T) {
	ctx := context.Background()
	const size = 2*layout.TileWidth*layout.TileWidth + 300
	s := newSynthLog(size)
	root := s.root(size)
	r := newResidentProofs(s.read)
	r.store = &residentStore{}
	defer r.stop()
	rng := rand.New(rand.NewPCG(41, 2))
	for range 300 {
		i := rng.Uint64N(size)
		p, err := r.inclusion(ctx, i, size)
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, s.leaf(i), slicesOf(p), root); err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
	}
	r.warmDone.Wait()
	if r.store.top(0) != nil || r.store.upperClaimed.Load() != 0 {
		t.Fatalf("a store without a region kept tile 0's top or %d upper tiles", r.store.upperClaimed.Load())
	}
}

// BenchmarkLeafRead compares what a warm proof reads of its level-0 tile
// in a data folder: the whole 8 KiB tile as Tessera's reader does
// (os.ReadFile) against the 1 KiB chunk of leafChunkReader, over 4,096
// tiles (a log of a million entries) at random.
func BenchmarkLeafRead(b *testing.B) {
	root := b.TempDir()
	tile := make([]byte, layout.TileWidth*sha256.Size)
	const tiles = 4096
	for i := range uint64(tiles) {
		writeLeafTile(b, root, i, tile)
	}
	b.Run("whole tile", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(41, 3))
		for b.Loop() {
			if _, err := os.ReadFile(filepath.Join(root, layout.TilePath(0, rng.Uint64N(tiles), 0))); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunk", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(41, 3))
		read := leafChunkReader(root)
		for b.Loop() {
			if _, err := read(rng.Uint64N(tiles), int(rng.Uint64N(8))*1024, 1024); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// writeLeafTile writes raw as full level-0 tile index of the data folder
// root, where a log's tiles are.
func writeLeafTile(tb testing.TB, root string, index uint64, raw []byte) {
	tb.Helper()
	name := filepath.Join(root, layout.TilePath(0, index, 0))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(name, raw, 0o644); err != nil {
		tb.Fatal(err)
	}
}
