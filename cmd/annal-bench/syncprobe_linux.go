package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// The open flags of the sync probe's dsync and direct forms.
const (
	syncOpenFlag   = unix.O_DSYNC
	directOpenFlag = unix.O_DIRECT
)

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
