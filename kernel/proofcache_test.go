package kernel

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/client"
)

// TestProofTiles_AsTesseraBuildsThem: proofs from the cached tiles equal
// Tessera's ProofBuilder's, for every leaf of trees that end inside a tile,
// on a tile edge and past it, and verify against the tree's root; asked
// from many goroutines at once (the cache is shared).
func TestProofTiles_AsTesseraBuildsThem(t *testing.T) {
	ctx := context.Background()
	k := openTest(t, t.TempDir())
	defer k.Close()
	root := rootOf(t, k)
	for i := range 600 {
		if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: fmt.Sprintf("p/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	size, err := k.log.IntegratedSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leaves := make([][]byte, size)
	for i := range size {
		entry, err := k.log.ReadEntry(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		leaves[i] = rfc6962.DefaultHasher.HashLeaf(entry)
	}
	for _, n := range []uint64{1, 2, 255, 256, 257, 511, 512, 513, size} {
		if n > size {
			continue
		}
		rootHash := mthOf(leaves[:n])
		pb, err := client.NewProofBuilder(ctx, n, k.log.ReadTile)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := uint64(w); i < n; i += 4 {
					got, err := k.log.InclusionProof(ctx, i, n)
					if err != nil {
						t.Errorf("size %d, leaf %d: %v", n, i, err)
						return
					}
					var path [][]byte
					for _, h := range got {
						path = append(path, h[:])
					}
					if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, n, leaves[i], path, rootHash); err != nil {
						t.Errorf("size %d, leaf %d: %v", n, i, err)
					}
				}
			}()
		}
		wg.Wait()
		for _, i := range []uint64{0, n / 2, n - 1} {
			want, err := pb.InclusionProof(ctx, i)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := k.log.InclusionProof(ctx, i, n)
			if len(got) != len(want) {
				t.Fatalf("size %d, leaf %d: %d hashes, Tessera %d", n, i, len(got), len(want))
			}
			for j := range want {
				if string(got[j][:]) != string(want[j]) {
					t.Fatalf("size %d, leaf %d: hash %d differs from Tessera's", n, i, j)
				}
			}
		}
		for _, old := range []uint64{1, n / 3, n - 1} {
			if old == 0 || old >= n {
				continue
			}
			got, err := k.log.ConsistencyProof(ctx, old, n)
			if err != nil {
				t.Fatal(err)
			}
			var path [][]byte
			for _, h := range got {
				path = append(path, h[:])
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old, n, path, mthOf(leaves[:old]), rootHash); err != nil {
				t.Errorf("consistency %d -> %d: %v", old, n, err)
			}
		}
	}
}

// mthOf is the RFC 6962 root of leaf hashes, by the definition.
func mthOf(leaves [][]byte) []byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return rfc6962.DefaultHasher.HashChildren(mthOf(leaves[:k]), mthOf(leaves[k:]))
}
