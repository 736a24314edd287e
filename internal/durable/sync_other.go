//go:build !linux

package durable

import "os"

// Fdatasync is fsync where the standard library offers no fdatasync (on
// macOS, File.Sync is F_FULLFSYNC, which is what durability needs).
func Fdatasync(f *os.File) error { return f.Sync() }
