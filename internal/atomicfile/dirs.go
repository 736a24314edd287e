package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sync/singleflight"
)

// Dirs makes folders durably: a folder it makes is synced into its
// parent's entries before any caller is told it exists, so that a file
// written and synced in it (Write) survives a crash with it. os.MkdirAll
// syncs nothing: on a file system that does not order a new folder's entry
// before a later fsync of a file in it, a crash could lose both.
//
// Callers may make the same folder at once: one makes it, the others wait
// until its parent is synced. A folder that already exists and that no
// caller of this Dirs is making is taken as it is. The zero Dirs is ready
// to use; one Dirs must serve every caller that makes folders in a tree.
type Dirs struct {
	// making runs one making of a folder at a time. Every caller looks
	// at its folder through it, even one that exists: a folder another
	// caller has made but not yet synced into its parent is waited for.
	making singleflight.Group
	// syncDir is SyncDir (nil), or what a test counts.
	syncDir func(dir string) error
}

// Make makes dir with perm, and each missing folder above it.
func (d *Dirs) Make(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	for {
		mine := false
		_, err, _ := d.making.Do(dir, func() (any, error) {
			mine = true
			return nil, d.make(dir, perm)
		})
		if err == nil || mine {
			return err
		}
		// Another caller's making failed: this one tries again.
	}
}

// make makes dir, if it is missing, after its parent.
func (d *Dirs) make(dir string, perm os.FileMode) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := d.Make(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if d.syncDir != nil {
		return d.syncDir(parent)
	}
	return SyncDir(parent)
}
