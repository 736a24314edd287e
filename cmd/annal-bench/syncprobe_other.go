//go:build !linux

package main

import (
	"os"
	"time"
)

// The open flags of the sync probe's dsync and direct forms: the direct
// form is Linux's only.
const (
	syncOpenFlag   = os.O_SYNC
	directOpenFlag = 0
)

// fdatasync is the write-ahead log's sync where there is no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }

// selfCPU is not measured here: the probe's CPU figures are Linux's.
func selfCPU() time.Duration { return 0 }
