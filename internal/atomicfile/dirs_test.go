package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Make makes the missing folders of a path, syncing each one's parent
// once, from the top down; a folder that exists costs no sync.
func TestDirsMakeSyncsEachNewFolderIntoItsParent(t *testing.T) {
	root := t.TempDir()
	var synced []string
	var mu sync.Mutex
	d := &Dirs{syncDir: func(dir string) error {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, dir)
		return SyncDir(dir)
	}}
	deep := filepath.Join(root, "a", "b", "c")
	if err := d.Make(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(deep); err != nil || !fi.IsDir() {
		t.Fatalf("not made: %v", err)
	}
	want := []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b")}
	if !slices.Equal(synced, want) {
		t.Fatalf("synced %q, want %q", synced, want)
	}
	synced = nil
	if err := d.Make(deep+"/", 0o700); err != nil || len(synced) != 0 {
		t.Fatalf("again: %v, synced %q", err, synced)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Make(filepath.Join(root, "file"), 0o700); err == nil {
		t.Fatal("made a folder where a file is")
	}
	if err := d.Make(filepath.Join(root, "file", "x"), 0o700); err == nil {
		t.Fatal("made a folder under a file")
	}
}

// Many callers making one new folder at once: it is made and synced into
// its parent once, and no caller returns before that sync is done.
func TestDirsMakeConcurrentCallersWaitForTheSync(t *testing.T) {
	for round := range 20 {
		root := t.TempDir()
		var syncs atomic.Int64
		var syncedAt atomic.Int64 // when the parent's sync ended
		d := &Dirs{syncDir: func(dir string) error {
			time.Sleep(2 * time.Millisecond) // a sync takes a while; callers must wait it out
			syncs.Add(1)
			syncedAt.Store(time.Now().UnixNano())
			return nil
		}}
		dir := filepath.Join(root, "subject")
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if err := d.Make(dir, 0o700); err != nil {
					t.Error(err)
					return
				}
				if syncedAt.Load() == 0 || time.Now().UnixNano() < syncedAt.Load() {
					t.Errorf("round %d: a caller returned before the parent was synced", round)
				}
			})
		}
		wg.Wait()
		if n := syncs.Load(); n != 1 {
			t.Fatalf("round %d: %d syncs of the parent, want 1", round, n)
		}
	}
}
