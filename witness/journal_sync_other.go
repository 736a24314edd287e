//go:build !linux

package witness

import "os"

// fdatasync is fsync where the standard library offers no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }
