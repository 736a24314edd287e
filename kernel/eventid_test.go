package kernel

import (
	"sync"
	"testing"

	"github.com/google/uuid"
)

// Event IDs drawn from many goroutines at once (their randomness read in
// blocks under one lock) are lower-case UUIDv7s, all different, and
// increasing in the order each goroutine drew them.
func TestEventIDsAreUniqueIncreasingV7(t *testing.T) {
	const goroutines, each = 8, 2000 // 16,000 IDs: more than one 4 KiB block of randomness
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				id, err := newEventID()
				if err != nil {
					t.Error(err)
					return
				}
				ids[g] = append(ids[g], id)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	randomBits := map[string]bool{}
	for _, list := range ids {
		for i, id := range list {
			u, err := uuid.Parse(id)
			if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 || u.String() != id {
				t.Fatalf("%q: not a lower-case UUIDv7 (%v)", id, err)
			}
			if seen[id] {
				t.Fatalf("%s drawn twice", id)
			}
			seen[id] = true
			if i > 0 && id <= list[i-1] {
				t.Fatalf("%s drawn after %s", id, list[i-1])
			}
			randomBits[string(u[8:])] = true // rand_b: 62 random bits and the variant
		}
	}
	if len(randomBits) != goroutines*each {
		t.Fatalf("%d IDs share their random bits with another", goroutines*each-len(randomBits))
	}
}
