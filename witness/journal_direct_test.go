package witness

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/annal-dev/annal/internal/durable"
)

// openDirectJournal opens a journal at path and skips the test where its
// file system takes no direct writes.
func openDirectJournal(t *testing.T, path string) (*journal, [][]byte) {
	t.Helper()
	j, records, err := openJournal(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.direct == nil {
		j.close()
		t.Skip("no O_DIRECT here: the journal writes through the page cache")
	}
	return j, records
}

// Frames written directly, of every size (within a block, across blocks,
// several blocks long), read back as written: after a reopen, which takes
// the end from the file, and after a reset, which starts a new epoch over
// the old frames.
func TestJournal_DirectWritesReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _ := openDirectJournal(t, path)
	var want []string
	payload := func(i int) []byte {
		return bytes.Repeat([]byte{byte('a' + i%26)}, []int{1, 37, 500, 3000, 4090, 9000}[i%6]+i)
	}
	for i := range 40 {
		p := payload(i)
		if err := j.append([][]byte{p}); err != nil {
			t.Fatal(err)
		}
		want = append(want, string(p))
		if i%9 == 8 {
			j.close()
			var records [][]byte
			j, records = openDirectJournal(t, path)
			if got := fmt.Sprintf("%q", records); got != fmt.Sprintf("%q", want) {
				t.Fatalf("after %d frames, reopened: %d records, want %d", i+1, len(records), len(want))
			}
		}
		if i == 20 {
			if err := j.reset(j.epoch + 1); err != nil {
				t.Fatal(err)
			}
			want = nil
		}
	}
	j.close()
	_, records, err := openJournal(path, 0)
	if err != nil || fmt.Sprintf("%q", records) != fmt.Sprintf("%q", want) {
		t.Fatalf("at the end: %d records (%v), want %d", len(records), err, len(want))
	}
}

// A direct write the file refuses for its alignment (EINVAL) is written
// through the page cache instead, and the journal goes on that way.
func TestJournal_RefusedDirectWriteFallsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _ := openDirectJournal(t, path)
	if err := j.append([][]byte{[]byte("direct")}); err != nil {
		t.Fatal(err)
	}
	// Scratch memory off the block alignment: the kernel refuses it.
	j.direct.buf = durable.AlignedBlocks(3*directBlock, directBlock)[1 : 1+2*directBlock]
	if err := j.append([][]byte{[]byte("refused, then buffered")}); err != nil {
		t.Fatal(err)
	}
	if j.direct != nil {
		t.Fatal("the journal kept writing directly after a refused write")
	}
	if err := j.append([][]byte{[]byte("buffered")}); err != nil {
		t.Fatal(err)
	}
	j.close()
	_, records, err := openJournal(path, 0)
	if err != nil || fmt.Sprintf("%s", records) != "[direct refused, then buffered buffered]" {
		t.Fatalf("reopened: %s, %v", records, err)
	}
}

// A frame whose write is left under way (startAppend, through AIO) is
// durable once finishAppend returns, and reads back after a reopen, the
// frames before and after it too.
func TestJournal_WriteLeftUnderWayReadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _ := openDirectJournal(t, path)
	if !j.canOverlap() {
		j.close()
		t.Skip("no native AIO here: journal writes are made at once")
	}
	var want []string
	for i := range 12 {
		p := bytes.Repeat([]byte{byte('a' + i)}, 100+i*700)
		want = append(want, string(p))
		if i%3 == 0 {
			if err := j.append([][]byte{p}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := j.startAppend([][]byte{p}); err != nil {
			t.Fatal(err)
		}
		if j.direct.pending == nil {
			t.Fatalf("frame %d: the write was made at once, not left under way", i)
		}
		if err := j.finishAppend(); err != nil {
			t.Fatal(err)
		}
	}
	j.close()
	_, records, err := openJournal(path, 0)
	if err != nil || fmt.Sprintf("%q", records) != fmt.Sprintf("%q", want) {
		t.Fatalf("reopened: %d records (%v), want %d", len(records), err, len(want))
	}
}
