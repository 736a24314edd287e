package durable

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// TestAlignedBlocks: the bytes start at a multiple of the alignment, are
// as many as asked, and cannot be grown into the padding.
func TestAlignedBlocks(t *testing.T) {
	for _, n := range []int{512, 4096, 3 * 4096} {
		for _, align := range []int{512, 4096} {
			b := AlignedBlocks(n, align)
			if at := uintptr(unsafe.Pointer(unsafe.SliceData(b))); at%uintptr(align) != 0 || len(b) != n || cap(b) != n {
				t.Errorf("AlignedBlocks(%d, %d): address %#x, len %d, cap %d", n, align, at, len(b), cap(b))
			}
		}
	}
}

// TestFdatasync syncs a written file, and fails on a closed one.
func TestFdatasync(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("durable")); err != nil {
		t.Fatal(err)
	}
	if err := Fdatasync(f); err != nil {
		t.Fatalf("Fdatasync: %v", err)
	}
	f.Close()
	if err := Fdatasync(f); err == nil {
		t.Fatal("Fdatasync of a closed file did not fail")
	}
}
