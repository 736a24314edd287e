package kernel

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
)

// mountSmallDisk mounts a tmpfs of size bytes, or skips where the machine
// does not allow it (mounting needs CAP_SYS_ADMIN).
func mountSmallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v); the writer-boundary test covers the same path", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file until the disk is full (bounded by limit bytes).
func fill(t *testing.T, path string, limit int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for n := 0; n < limit; n += len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatalf("the disk took %d bytes and was not full", limit)
}

// tempFilesIn lists what interrupted writes left in the log folder.
func tempFilesIn(t *testing.T, logPath string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(logPath, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			name := e.Name()
			if logstore.TempFileName.MatchString(name) || (filepath.Ext(filepath.Dir(p)) == ".p" && len(name) > 3) {
				found = append(found, p)
			}
		}
		return nil
	})
	return found
}

// A real full disk: the kernel refuses writes and says why, resumes by
// itself when space returns with every receipt readable, stops within the
// bound while the disk is full, leaves no temporary file, and starts again
// on a log that audits clean.
func TestFullDiskStopsWritesAndResumesWhenSpaceReturns(t *testing.T) {
	const diskSize = 24 << 20
	mnt := mountSmallDisk(t, diskSize)
	dir := filepath.Join(mnt, "data")
	cfg := testConfig(t, dir)
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root := rootOf(t, k)
	var receipts []*Receipt
	submit := func(i int) error {
		rc, err := k.Submit(ctx, root, ActionRequest{Type: event.Observe, Target: fmt.Sprintf("workspace/%d", i)})
		if err == nil {
			receipts = append(receipts, rc)
		}
		return err
	}
	for i := range 20 {
		if err := submit(i); err != nil {
			t.Fatal(err)
		}
	}
	filler := filepath.Join(mnt, "filler")
	fill(t, filler, diskSize)
	var failed error
	// The write-ahead log takes entries into the part of its segment it
	// grew ahead of them (1 MiB, some 2,500 of these) before it needs
	// more of the disk.
	for i := 20; i < 8000 && failed == nil; i++ {
		failed = submit(i)
	}
	if !errors.Is(failed, logstore.ErrUnavailable) {
		t.Fatalf("an action on a full disk: %v, want unavailable", failed)
	}
	if k.Ready() == nil {
		t.Fatal("the kernel says it takes writes on a full disk")
	}
	if err := submit(-1); !errors.Is(err, logstore.ErrUnavailable) {
		t.Fatalf("an action after the failed append: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitReady(t, k)
	for i := range 20 {
		if err := submit(10000 + i); err != nil {
			t.Fatalf("an action after space returned: %v", err)
		}
	}
	for _, rc := range receipts {
		entry, err := k.Entry(ctx, rc.Index)
		if err != nil {
			t.Fatalf("receipt %d: %v", rc.Index, err)
		}
		if leaf := event.LeafHash(entry); fmt.Sprintf("%x", leaf) != rc.LeafHash {
			t.Fatalf("receipt %d: the log holds another entry", rc.Index)
		}
	}
	if diff, err := k.stateMatchesReplay(ctx); err != nil || diff != nil {
		t.Fatalf("state differs from the replay: %v %v", diff, err)
	}

	// A stop while the disk is full again is quick and leaves no temp file.
	fill(t, filler, diskSize)
	for i := 0; i < 2000 && k.Ready() == nil; i++ {
		_ = submit(20000 + i)
	}
	start := time.Now()
	if err := k.Close(); err != nil {
		t.Logf("close on a full disk: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a stop on a full disk took %v", took)
	}
	if left := tempFilesIn(t, filepath.Join(dir, logstore.LogDirName)); len(left) > 0 {
		t.Fatalf("the stop left %d temp files: %v", len(left), left[:min(5, len(left))])
	}
	os.Remove(filler)
	k2, err := Open(cfg)
	if err != nil {
		t.Fatalf("start after the disk filled twice: %v", err)
	}
	defer k2.Close()
	for _, rc := range receipts {
		if _, err := k2.Entry(ctx, rc.Index); err != nil {
			t.Fatalf("receipt %d after restart: %v", rc.Index, err)
		}
	}
	key, _ := LocalVerifierKey(dir)
	if rep, err := Audit(ctx, LocalLog(dir), key); err != nil || rep.Broken != nil {
		t.Fatalf("audit: %+v %v", rep, err)
	}
	// The state file written around the full disk, folded to the log's
	// end, equals a fresh replay: no state write lost on the full disk.
	if diff, err := k2.stateMatchesReplay(ctx); err != nil || diff != nil {
		t.Fatalf("the state file after a full disk differs from the replay: %v %v", diff, err)
	}
}
