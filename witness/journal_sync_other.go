//go:build !linux

package witness

import "os"

// fdatasync is fsync where the standard library offers no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }

// directOpenFlags: no direct writes (journal_direct.go) where O_DIRECT is
// not known.
const directOpenFlags = 0
