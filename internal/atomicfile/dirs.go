package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
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
	mu sync.Mutex
	// making holds the folders being made, each with a channel closed once
	// its parent is synced (or its making failed).
	making map[string]chan struct{}
	// syncDir is SyncDir (nil), or what a test counts.
	syncDir func(dir string) error
}

// Make makes dir with perm, and each missing folder above it.
func (d *Dirs) Make(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	for {
		fi, err := os.Stat(dir)
		switch {
		case err == nil && !fi.IsDir():
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		case err == nil:
			// Made by another caller, whose parent may not be synced yet?
			if wait := d.pending(dir); wait != nil {
				<-wait
				continue
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		done, mine := d.claim(dir)
		if !mine {
			<-done
			continue // made by the other caller, or to make again if it failed
		}
		err = d.make(dir, perm)
		d.release(dir, done)
		return err
	}
}

// make makes dir, which this caller claimed, after its parent.
func (d *Dirs) make(dir string, perm os.FileMode) error {
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

// pending is the channel of dir while a caller is making it, or nil.
func (d *Dirs) pending(dir string) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.making[dir]
}

// claim makes the caller the maker of dir (mine), or returns the channel
// of the caller that is.
func (d *Dirs) claim(dir string) (done chan struct{}, mine bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ch, ok := d.making[dir]; ok {
		return ch, false
	}
	if d.making == nil {
		d.making = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	d.making[dir] = ch
	return ch, true
}

func (d *Dirs) release(dir string, done chan struct{}) {
	d.mu.Lock()
	delete(d.making, dir)
	d.mu.Unlock()
	close(done)
}
