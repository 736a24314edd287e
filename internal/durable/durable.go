// Package durable holds the small pieces of durable writing that the
// kernel's write-ahead log, the witness's journal and the benchmark's sync
// probe share, so that the probe measures the very sync the log makes:
// fdatasync where the system has one, and memory aligned for O_DIRECT.
package durable

import "unsafe"

// AlignedBlocks is n bytes starting at a multiple of align (a power of
// two) in memory, as O_DIRECT writes need them. The Go heap does not move
// what it allocates, so the alignment holds.
func AlignedBlocks(n, align int) []byte {
	b := make([]byte, n+align)
	skip := (align - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(align))) % align
	return b[skip : skip+n : skip+n]
}
