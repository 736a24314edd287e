//go:build linux

package witness

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable, and of its metadata only what reading
// the data needs (not its times).
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// directOpenFlags open the journal for direct writes (journal_direct.go).
const directOpenFlags = unix.O_DIRECT | unix.O_DSYNC
