//go:build linux

package witness

import "golang.org/x/sys/unix"

// directOpenFlags open the journal for direct writes (journal_direct.go).
const directOpenFlags = unix.O_DIRECT | unix.O_DSYNC
