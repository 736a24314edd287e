package logstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api/layout"
)

// laggingBucket is a LogReader over a log of sequenced entries whose
// integration trails: each read of the integrated size moves it one step
// along steps, and only the bundles at the integrated size (and full ones
// below it) exist, as in a bucket Tessera's AWS driver writes a second
// after sequencing.
type laggingBucket struct {
	tessera.LogReader
	mu         sync.Mutex
	sequenced  uint64
	steps      []uint64
	integrated uint64
}

func (b *laggingBucket) IntegratedSize(context.Context) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.steps) > 0 {
		b.integrated, b.steps = b.steps[0], b.steps[1:]
	}
	return b.integrated, nil
}

func (b *laggingBucket) NextIndex(context.Context) (uint64, error) { return b.sequenced, nil }

func (b *laggingBucket) ReadEntryBundle(_ context.Context, index uint64, p uint8) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p != layout.PartialTileSize(0, index, b.integrated) || index*layout.EntryBundleWidth >= b.integrated {
		return nil, fmt.Errorf("tile/entries/%03d.p/%d: %w", index, p, os.ErrNotExist)
	}
	width := uint64(p)
	if p == 0 {
		width = layout.EntryBundleWidth
	}
	var bundle []byte // tlog-tiles: each entry a 16-bit length and its bytes
	for i := range width {
		entry := fmt.Appendf(nil, "entry %d", index*layout.EntryBundleWidth+i)
		bundle = append(binary.BigEndian.AppendUint16(bundle, uint16(len(entry))), entry...)
	}
	return bundle, nil
}

func TestReadBundleWaitsForTheFullBundleIntegrationHasNotWrittenYet(t *testing.T) {
	// The kernel has folded 300 entries; the bucket has 200 and reaches 300
	// a few reads later. Bundle 0 is full at 300 but only partial (200) in
	// the bucket when the read starts.
	bucket := &laggingBucket{sequenced: 300, integrated: 200, steps: []uint64{200, 200, 300}}
	l := &Log{Reader: bucket}
	b, err := l.ReadBundle(context.Background(), 0, 300)
	if err != nil {
		t.Fatalf("read of a full bundle the bucket does not hold yet: %v", err)
	}
	if len(b.Entries) != layout.EntryBundleWidth || string(b.Entries[255]) != "entry 255" {
		t.Fatalf("bundle 0 has %d entries, the last %q", len(b.Entries), b.Entries[len(b.Entries)-1])
	}
}

func TestReadBundleReadsTheWiderBundleWhenThePartialOneWasCollected(t *testing.T) {
	// A history read asks for bundle 0 at size 10; the log has grown to 260
	// since, so the partial bundle at 10 is gone and the full one holds the
	// same entries first.
	bucket := &laggingBucket{sequenced: 260, integrated: 260}
	l := &Log{Reader: bucket}
	b, err := l.ReadBundle(context.Background(), 0, 10)
	if err != nil {
		t.Fatalf("read of a collected partial bundle: %v", err)
	}
	if string(b.Entries[9]) != "entry 9" {
		t.Fatalf("entry 9 of bundle 0 reads %q", b.Entries[9])
	}
}

func TestReadBundleOfEntriesNeverSequencedFails(t *testing.T) {
	bucket := &laggingBucket{sequenced: 100, integrated: 100}
	l := &Log{Reader: bucket}
	if _, err := l.ReadBundle(context.Background(), 1, 300); err == nil {
		t.Fatal("a bundle past the sequenced log was read")
	}
}
