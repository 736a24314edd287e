//go:build !linux

package main

import (
	"errors"
	"time"
)

// processCPU is not measured outside Linux.
func processCPU(pid int) (time.Duration, error) {
	return 0, errors.ErrUnsupported
}
