package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsTopdirFlag is FS_TOPDIR_FL (chattr +T), which golang.org/x/sys does
// not name.
const fsTopdirFlag = 0x00020000

// spreadSubfolders marks dir as a top of directory hierarchies (chattr
// +T), so that ext4 places each folder made in it, and every file the
// servers then make there, in a block group chosen afresh (the Orlov
// allocator's top-level rule) instead of beside dir's parent.
//
// Why a benchmark cares: ext4 without a journal, like this machine's,
// skips every inode deleted in the last one to six minutes when it
// allocates a new one, and checks each of them one at a time. In the
// block groups of /tmp, where tests and earlier runs delete thousands of
// files, a tile's creation then cost up to a millisecond of CPU, 5–6% of
// annald's under load after an earlier run's clean-up; in a group of its
// own, 0.3%. Every server measured gets its own folder in dir, so the
// marking is the same for each. File systems without the flag refuse
// it, and the caller goes on without.
func spreadSubfolders(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return &os.PathError{Op: "FS_IOC_GETFLAGS", Path: dir, Err: err}
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFlag)); err != nil {
		return &os.PathError{Op: "FS_IOC_SETFLAGS", Path: dir, Err: err}
	}
	return nil
}

// spreadsSubfolders reports whether dir carries the flag.
func spreadsSubfolders(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return false, err
	}
	return flags&fsTopdirFlag != 0, nil
}
