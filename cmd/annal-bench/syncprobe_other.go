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

// selfCPU is not measured here: the probe's CPU figures are Linux's.
func selfCPU() time.Duration { return 0 }
