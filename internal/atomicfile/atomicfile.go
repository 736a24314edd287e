// Package atomicfile writes files so that a crash or an error at any
// instant leaves either the old file or the whole new one, never a part:
// the content goes to a temporary file in the same folder, which is synced
// and then renamed over the target, and the folder is synced so that the
// rename itself survives a crash. Dirs makes the folders such files go in,
// each synced into its parent, so that a new folder survives too.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write copies r into path with mode, atomically. On error path is
// untouched and the temporary file removed.
func Write(path string, r io.Reader, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir syncs folder dir, so that a file created, renamed or removed in
// it stays so after a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
