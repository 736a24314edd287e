//go:build !linux

package witness

// directOpenFlags: no direct writes (journal_direct.go) where O_DIRECT is
// not known.
const directOpenFlags = 0
