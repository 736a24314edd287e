package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/internal/durable"
)

// BenchmarkAppend is the cost of making one group of 300-byte entries
// durable: compare ns/op with BenchmarkFsyncOnly, one bare write and fsync
// on the same file system in the same run. grow=no is the same with
// segments that grow by each write's records only (Options.GrowBytes -1),
// the baseline of the growth ahead of the records; cpu-µs/op is the
// process's CPU time (user and system) an Append.
func BenchmarkAppend(b *testing.B) {
	for _, group := range []int{1, 16, 256} {
		for _, c := range []struct {
			grow string
			opts Options
		}{{"yes", Options{}}, {"no", Options{GrowBytes: -1}}} {
			b.Run(fmt.Sprintf("group=%d/grow=%s", group, c.grow), func(b *testing.B) {
				benchmarkAppend(b, group, c.opts)
			})
		}
	}
}

func benchmarkAppend(b *testing.B, group int, opts Options) {
	l, _, _ := mustOpen(b, b.TempDir(), 0, opts)
	defer l.Close()
	entries := make([][]byte, group)
	for i := range entries {
		entries[i] = make([]byte, 300)
		for j := range entries[i] {
			entries[i][j] = byte('a' + (i+j)%26)
		}
	}
	b.SetBytes(int64(group * 300))
	b.ReportAllocs()
	cpu := processCPU()
	b.ResetTimer()
	for b.Loop() {
		if err := l.Append(l.Next(), entries); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*group), "ns/entry")
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFsyncOnly appends 300 bytes to a file and fsyncs it (File.Sync):
// the floor any durable append pays.
func BenchmarkFsyncOnly(b *testing.B) { benchmarkBareAppend(b, (*os.File).Sync) }

// BenchmarkFdatasyncOnly is BenchmarkFsyncOnly with the fdatasync Append
// uses: the floor of a group of one.
func BenchmarkFdatasyncOnly(b *testing.B) { benchmarkBareAppend(b, durable.Fdatasync) }

// benchmarkBareAppend appends 300 bytes to a file and syncs it with sync,
// without the WAL's framing.
func benchmarkBareAppend(b *testing.B, sync func(*os.File) error) {
	f, err := os.Create(filepath.Join(b.TempDir(), "bare"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	entry := make([]byte, 300)
	b.SetBytes(300)
	for b.Loop() {
		if _, err := f.Write(entry); err != nil {
			b.Fatal(err)
		}
		if err := sync(f); err != nil {
			b.Fatal(err)
		}
	}
}
