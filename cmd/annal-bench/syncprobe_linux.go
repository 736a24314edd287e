package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// The open flags of the sync probe's dsync and direct forms.
const (
	syncOpenFlag   = unix.O_DSYNC
	directOpenFlag = unix.O_DIRECT
)

// fdatasync is the write-ahead log's sync (kernel/internal/wal).
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
