//go:build !linux

package wal

import "os"

// fdatasync is fsync where the standard library offers no fdatasync
// (on macOS, File.Sync is F_FULLFSYNC, which is what durability needs).
func fdatasync(f *os.File) error { return f.Sync() }
