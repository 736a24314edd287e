package main

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// On a file system that has the flag (ext4, as /tmp here), the folder
// carries it afterwards; one that has not refuses it with an error.
func TestSpreadSubfolders(t *testing.T) {
	dir := t.TempDir()
	before, _ := spreadsSubfolders(dir)
	if before {
		t.Fatal("a new folder already carries the top-level flag")
	}
	err := spreadSubfolders(dir)
	if runtime.GOOS != "linux" || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		if err == nil {
			t.Fatal("no error where the flag is not supported")
		}
		t.Skipf("%s has no top-level flag: %v", dir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	after, err := spreadsSubfolders(dir)
	if err != nil || !after {
		t.Fatalf("after spreadSubfolders: flag %v, %v", after, err)
	}
}
