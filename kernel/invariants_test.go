package kernel

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// INV-1 (§6.2): five actions, then the third entry's payload is changed on
// disk behind the kernel's back. Its leaf hash no longer matches the signed
// tree: the kernel refuses to start on it, naming the bundle, and repair
// cannot mend it. Changing a stored tile instead is refused too, and
// repair derives the tile again from the entries.
func TestINV1_TamperingIsDetected(t *testing.T) {
	for _, what := range []string{"entry", "tile"} {
		t.Run(what, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			k := openTest(t, dir)
			root := rootOf(t, k)
			var receipts []*Receipt
			for i := range 5 {
				r, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: fmt.Sprintf("workspace/%d", i), Payload: []byte(fmt.Sprintf(`{"text":"entry-%d-original"}`, i))})
				if err != nil {
					t.Fatal(err)
				}
				receipts = append(receipts, r)
			}
			third := receipts[2]
			p, err := k.AwaitInclusionProof(ctx, receipts[4].Index)
			if err != nil {
				t.Fatal(err)
			}
			saved, err := k.InclusionProof(ctx, third.Index)
			if err != nil {
				t.Fatal(err)
			}
			entry, _ := k.Entry(ctx, third.Index)
			if _, err := verifier.VerifyProof(entry, saved.Marshal(), k.VerifierKey()); err != nil {
				t.Fatal(err)
			}
			if _, err := k.VerifyLog(ctx); err != nil {
				t.Fatalf("untouched log: %v", err)
			}
			size := p.Index + 1
			k.Close()

			var file string
			var from, to []byte
			if what == "entry" {
				file = filepath.Join(dir, "log", "tile", "entries", "000.p", fmt.Sprint(size))
				from, to = []byte("entry-2-original"), []byte("entry-2-tampered")
			} else {
				file = filepath.Join(dir, "log", "tile", "0", "000.p", fmt.Sprint(size))
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if what == "entry" {
				if !bytes.Contains(raw, from) {
					t.Fatalf("%s does not hold %q", file, from)
				}
				raw = bytes.Replace(raw, from, to, 1)
			} else {
				raw[32*third.Index] ^= 0x01 // the third action's leaf hash in the level-0 tile
			}
			if err := os.WriteFile(file, raw, 0o644); err != nil {
				t.Fatal(err)
			}

			// The start-up check reads the newest bundle and tiles: the
			// kernel refuses to serve or append on top of either change.
			_, err = Open(testConfig(t, dir))
			if what == "entry" {
				if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "changed after it was logged") {
					t.Fatalf("open on a tampered entry: %v", err)
				}
				if _, err := Repair(ctx, testConfig(t, dir)); err == nil {
					t.Fatal("repair mended a tampered entry")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), file) {
				t.Fatalf("open on a tampered tile: %v", err)
			}
			// A tile holds nothing its entries do not: repair derives it
			// again, and the saved proof holds.
			if _, err := Repair(ctx, testConfig(t, dir)); err != nil {
				t.Fatal(err)
			}
			k2 := openTest(t, dir)
			defer k2.Close()
			entry, _ = k2.Entry(ctx, third.Index)
			if _, err := verifier.VerifyProof(entry, saved.Marshal(), k2.VerifierKey()); err != nil {
				t.Fatalf("after repair: %v", err)
			}
		})
	}
}

// INV-3 (§6.2): ten entries, an inclusion proof for each checked with an
// independent RFC 6962 verifier (at most 4 hashes, 3.6 on average), then
// five more and the consistency proof 10 -> 15.
func TestINV3_Integrity(t *testing.T) {
	ctx := context.Background()
	k := openTest(t, t.TempDir())
	defer k.Close()
	root := rootOf(t, k)
	for i := range 9 { // with genesis, ten entries
		if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Observe, Target: fmt.Sprintf("workspace/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.AwaitInclusionProof(ctx, 9); err != nil {
		t.Fatal(err)
	}
	cp10, err := k.LatestCheckpoint(ctx)
	if err != nil || cp10.Size != 10 {
		t.Fatalf("checkpoint %+v %v", cp10, err)
	}
	total, most := 0, 0
	for i := uint64(0); i < 10; i++ {
		p, err := k.InclusionProof(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		entry, _ := k.Entry(ctx, i)
		if _, err := verifier.VerifyProof(entry, p.Marshal(), k.VerifierKey()); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		total += len(p.Hashes)
		most = max(most, len(p.Hashes))
	}
	if most != 4 || total != 36 {
		t.Fatalf("proofs have at most %d hashes, %d in all; want 4 and 36 (average 3.6)", most, total)
	}
	for i := range 5 {
		if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Observe, Target: fmt.Sprintf("workspace/more/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.AwaitInclusionProof(ctx, 14); err != nil {
		t.Fatal(err)
	}
	cp15, _ := k.LatestCheckpoint(ctx)
	hashes, err := k.ConsistencyProof(ctx, 10, 15)
	if err != nil || cp15.Size != 15 {
		t.Fatalf("consistency: %v (size %d)", err, cp15.Size)
	}
	raw := make([][]byte, len(hashes))
	for i := range hashes {
		raw[i] = hashes[i][:]
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, 10, 15, raw, cp10.Hash[:], cp15.Hash[:]); err != nil {
		t.Fatalf("consistency 10 -> 15: %v", err)
	}
	if _, err := verifier.VerifyConsistency(cp10.Raw, cp15.Raw, checkpoints.MarshalHashes(hashes), k.VerifierKey()); err != nil {
		t.Fatal(err)
	}
}
