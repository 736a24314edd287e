//go:build !linux

package main

import "errors"

// spreadSubfolders is ext4's top-level directory hint (see
// placement_linux.go); elsewhere there is none.
func spreadSubfolders(dir string) error {
	return errors.New("no top-level directory hint on this system")
}

func spreadsSubfolders(dir string) (bool, error) { return false, nil }
