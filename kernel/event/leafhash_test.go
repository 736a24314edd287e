package event

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
)

// LeafHash, which sums in pooled buffers, is RFC 6962's leaf hash for
// entries of every size, the pool's bound and past it, from goroutines at
// once, whatever a buffer held before.
func TestLeafHashIsRFC6962(t *testing.T) {
	sizes := []int{0, 1, 55, 56, 63, 64, 65, 600, maxPooledLeafInput - 2, maxPooledLeafInput - 1, maxPooledLeafInput, 3 * maxPooledLeafInput}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 400 {
				n := sizes[i%len(sizes)]
				if i%3 == 0 {
					n = rng.IntN(2000)
				}
				entry := make([]byte, n)
				for j := range entry {
					entry[j] = byte(rng.Uint32())
				}
				got := LeafHash(entry)
				if want := rfc6962.DefaultHasher.HashLeaf(entry); !bytes.Equal(got[:], want) {
					t.Errorf("LeafHash of %d bytes = %x, RFC 6962 gives %x", n, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
