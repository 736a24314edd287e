package kernel

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/verifier"
	"github.com/transparency-dev/tessera/api/layout"
)

// folder is a data folder with a closed log of n actions and their receipts.
type folder struct {
	dir      string
	receipts []*Receipt
	pub      string // log.pub as first written
}

func newFolder(t *testing.T, n int) *folder {
	t.Helper()
	f := &folder{dir: t.TempDir()}
	k := openTest(t, f.dir)
	root := rootOf(t, k)
	ctx := context.Background()
	for i := range n {
		rc, err := k.Submit(ctx, root, ActionRequest{Type: event.Observe, Target: fmt.Sprintf("workspace/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		f.receipts = append(f.receipts, rc)
	}
	if _, err := k.AwaitInclusionProof(ctx, f.receipts[n-1].Index); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(f.dir, logstore.VerifierKeyName))
	if err != nil {
		t.Fatal(err)
	}
	f.pub = string(pub)
	return f
}

func (f *folder) path(rel ...string) string { return filepath.Join(append([]string{f.dir}, rel...)...) }

// size is the log's size from the tree state.
func (f *folder) size(t *testing.T) uint64 {
	t.Helper()
	size, _, err := logstore.DiskLog{Root: f.path(logstore.LogDirName)}.TreeState()
	if err != nil {
		t.Fatal(err)
	}
	return size
}

// newestBundle and newestTile are the right edge's files.
func (f *folder) newestBundle(t *testing.T) string {
	size := f.size(t)
	return f.path(logstore.LogDirName, layout.EntriesPath((size-1)/layout.EntryBundleWidth, layout.PartialTileSize(0, (size-1)/layout.EntryBundleWidth, size)))
}

func (f *folder) tile(t *testing.T, level, index uint64) string {
	return f.path(logstore.LogDirName, layout.TilePath(level, index, layout.PartialTileSize(level, index, f.size(t))))
}

// refuses opens the folder and wants a refusal naming file and saying why.
func (f *folder) refuses(t *testing.T, file, why string) error {
	t.Helper()
	k, err := Open(testConfig(t, f.dir))
	if err == nil {
		k.Close()
		t.Fatalf("annald started on a folder whose %s is damaged", file)
	}
	if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), why) {
		t.Fatalf("refusal %q does not name %s and %q", err, file, why)
	}
	return err
}

// sound opens the folder and checks that every receipt is still readable
// and proves its inclusion under the log's original key.
func (f *folder) sound(t *testing.T) *Kernel {
	t.Helper()
	k := openTest(t, f.dir)
	t.Cleanup(func() { k.Close() })
	if k.VerifierKey()+"\n" != f.pub {
		t.Fatalf("the log's key changed: %s, was %s", k.VerifierKey(), f.pub)
	}
	ctx := context.Background()
	for _, rc := range f.receipts {
		entry, err := k.Entry(ctx, rc.Index)
		if err != nil {
			t.Fatalf("receipt %d: %v", rc.Index, err)
		}
		p, err := k.InclusionProof(ctx, rc.Index)
		if err != nil {
			t.Fatalf("receipt %d: %v", rc.Index, err)
		}
		if _, err := verifier.VerifyProof(entry, p.Marshal(), strings.TrimSpace(f.pub)); err != nil {
			t.Fatalf("receipt %d under the original key: %v", rc.Index, err)
		}
	}
	if _, err := k.VerifyLog(ctx); err != nil {
		t.Fatal(err)
	}
	return k
}

func repair(t *testing.T, f *folder) (*RepairReport, error) {
	t.Helper()
	return Repair(context.Background(), testConfig(t, f.dir))
}

func TestMissingSigningKeyRefusesAndNeverReKeys(t *testing.T) {
	f := newFolder(t, 3)
	if err := os.Remove(f.path(logstore.SigningKeyFileName)); err != nil {
		t.Fatal(err)
	}
	f.refuses(t, f.path(logstore.SigningKeyFileName), "missing")
	if pub, _ := os.ReadFile(f.path(logstore.VerifierKeyName)); string(pub) != f.pub {
		t.Fatalf("log.pub was rewritten: %q", pub)
	}
	if _, err := os.Stat(f.path(logstore.SigningKeyFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new log.key was made: %v", err)
	}
	if _, err := Rebuild(context.Background(), testConfig(t, f.dir)); err == nil || !strings.Contains(err.Error(), logstore.SigningKeyFileName) {
		t.Fatalf("rebuild without the key: %v", err)
	}
}

func TestUnreadableOrTooOpenSigningKeyRefuses(t *testing.T) {
	f := newFolder(t, 1)
	key := f.path(logstore.SigningKeyFileName)
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	f.refuses(t, key, "chmod 600")
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(key, 0o700); err != nil { // unreadable as a file
		t.Fatal(err)
	}
	f.refuses(t, key, "")
	os.Remove(key)
	// A key that is someone else's: checkpoints stop verifying.
	other, vkey, err := generateKeyFor(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path(logstore.VerifierKeyName), []byte(vkey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.refuses(t, f.path(logstore.LogDirName, "checkpoint"), "does not verify")
}

func generateKeyFor(t *testing.T, f *folder) (string, string, error) {
	origin, err := os.ReadFile(f.path(logstore.OriginFileName))
	if err != nil {
		t.Fatal(err)
	}
	return generateLogKey(strings.TrimSpace(string(origin)))
}

func TestMissingVerifierKeyIsDerivedFromTheSigningKey(t *testing.T) {
	f := newFolder(t, 1)
	if err := os.Remove(f.path(logstore.VerifierKeyName)); err != nil {
		t.Fatal(err)
	}
	f.sound(t)
	if pub, _ := os.ReadFile(f.path(logstore.VerifierKeyName)); string(pub) != f.pub {
		t.Fatalf("derived log.pub %q, was %q", pub, f.pub)
	}
}

func TestCorruptCheckpointRefusesAndRepairSignsItAgain(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"flipped":   func(b []byte) []byte { b[len(b)-10] ^= 0x20; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"empty":     func([]byte) []byte { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFolder(t, 3)
			cp := f.path(logstore.LogDirName, "checkpoint")
			raw, _ := os.ReadFile(cp)
			if err := os.WriteFile(cp, damage(raw), 0o644); err != nil {
				t.Fatal(err)
			}
			f.refuses(t, cp, "does not verify")
			rep, err := repair(t, f)
			if err != nil || len(rep.Mended) != 1 || !strings.Contains(rep.Mended[0], cp) {
				t.Fatalf("repair: %+v %v", rep, err)
			}
			f.sound(t)
		})
	}
}

func TestTruncatedNewestBundleRefusesAndIsNotPapered(t *testing.T) {
	f := newFolder(t, 5)
	bundle := f.newestBundle(t)
	raw, _ := os.ReadFile(bundle)
	if err := os.WriteFile(bundle, raw[:len(raw)-30], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.refuses(t, bundle, "does not hold"); !errors.Is(err, logstore.ErrDamaged) {
		t.Fatalf("a lost entry is not ErrDamaged: %v", err)
	}
	if _, err := repair(t, f); err == nil || !strings.Contains(err.Error(), bundle) || !strings.Contains(err.Error(), "backup") {
		t.Fatalf("repair of lost entries: %v", err)
	}
	if now, _ := os.ReadFile(bundle); len(now) != len(raw)-30 {
		t.Fatal("repair wrote the bundle")
	}
}

func TestEditedNewestEntryRefuses(t *testing.T) {
	f := newFolder(t, 5)
	bundle := f.newestBundle(t)
	raw, _ := os.ReadFile(bundle)
	edited := strings.Replace(string(raw), "workspace/4", "workspace/X", 1)
	if edited == string(raw) {
		t.Fatal("the newest bundle does not hold the last action")
	}
	if err := os.WriteFile(bundle, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	f.refuses(t, bundle, "changed after it was logged")
	if _, err := repair(t, f); err == nil || !strings.Contains(err.Error(), "changed after it was logged") {
		t.Fatalf("repair of an edited entry: %v", err)
	}
	// The tile that repair tried to derive from the edited entry was put back.
	f.refuses(t, bundle, "changed after it was logged")
}

func TestDamagedNewestTileRefusesAndRepairDerivesIt(t *testing.T) {
	for name, damage := range map[string]func(string) error{
		"truncated": func(p string) error { raw, _ := os.ReadFile(p); return os.WriteFile(p, raw[:len(raw)-7], 0o644) },
		"flipped":   func(p string) error { raw, _ := os.ReadFile(p); raw[5] ^= 1; return os.WriteFile(p, raw, 0o644) },
		"missing":   os.Remove,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFolder(t, 300) // two bundles: level-0 tiles 0 (full) and 1, and a level-1 tile
			for _, tile := range []string{f.tile(t, 0, 1), f.tile(t, 1, 0)} {
				if err := damage(tile); err != nil {
					t.Fatal(err)
				}
				f.refuses(t, tile, "")
				rep, err := repair(t, f)
				if err != nil || len(rep.Mended) != 1 || !strings.Contains(rep.Mended[0], tile) {
					t.Fatalf("repair: %+v %v", rep, err)
				}
				f.sound(t).Close()
			}
		})
	}
}

func TestMissingTreeStateRefuses(t *testing.T) {
	f := newFolder(t, 2)
	if err := os.Remove(f.path(logstore.LogDirName, logstore.TreeStatePath)); err != nil {
		t.Fatal(err)
	}
	// Tessera would start an empty log over the old one.
	f.refuses(t, f.path(logstore.LogDirName, logstore.TreeStatePath), "missing")
}

func TestTempFilesOfInterruptedWritesAreRemoved(t *testing.T) {
	f := newFolder(t, 3)
	bundle := f.newestBundle(t)
	temps := []string{bundle + "1234567", f.path(logstore.LogDirName, "checkpoint987654"), f.path(logstore.LogDirName, ".state", "treeState55555")}
	for _, p := range temps {
		if err := os.WriteFile(p, []byte("partial write"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k := f.sound(t)
	for _, p := range temps {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was left: %v", p, err)
		}
	}
	if _, err := os.Stat(bundle); err != nil {
		t.Fatalf("the bundle itself went: %v", err)
	}
	k.Close()
}

// An entry edited in an old bundle is beyond the start-up check of the
// newest files: a small log is scrubbed whole before it is served, a large
// one in the background, which stops every writer when it finds it.
func TestScrubFindsAnOldEditedEntryAndStopsWrites(t *testing.T) {
	f := newFolder(t, 300)
	old := f.path(logstore.LogDirName, layout.EntriesPath(0, 0))
	raw, _ := os.ReadFile(old)
	edited := strings.Replace(string(raw), "workspace/7\"", "workspace/8\"", 1)
	if edited == string(raw) {
		t.Fatal("the first bundle does not hold action 7")
	}
	if err := os.WriteFile(old, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	// A small log is read whole before it is served.
	f.refuses(t, old, "changed after it was logged")
	// A large one is served while the scrub reads it.
	cfg := testConfig(t, f.dir)
	cfg.syncScrubEntries = 1
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	<-k.scrubbed
	err = k.Ready()
	if err == nil || !strings.Contains(err.Error(), old) || !strings.Contains(err.Error(), "changed after it was logged") {
		t.Fatalf("readiness after the scrub: %v", err)
	}
	if _, err := k.Submit(context.Background(), rootOf(t, k), ActionRequest{Type: event.Observe, Target: "workspace/after"}); !errors.Is(err, logstore.ErrUnavailable) {
		t.Fatalf("a write on a damaged log: %v", err)
	}
	if _, err := k.VerifyLog(context.Background()); err == nil {
		t.Fatal("VerifyLog passed a damaged log")
	}
}

func generateLogKey(origin string) (string, string, error) { return checkpoints.GenerateLogKey(origin) }

// Every kind of file in a data folder, truncated to half or with one byte
// flipped: annald refuses to start naming the file, or stops taking
// writes once its scrub names it, or runs with the log verifying under its
// original key and every receipt readable. It never crashes and never
// serves a log it has not checked.
func TestEveryFileKindTruncatedOrFlipped(t *testing.T) {
	kinds := map[string]func(f *folder) string{
		"checkpoint":      func(f *folder) string { return f.path(logstore.LogDirName, logstore.CheckpointFileName) },
		"tree state":      func(f *folder) string { return f.path(logstore.LogDirName, logstore.TreeStatePath) },
		"newest bundle":   func(f *folder) string { return f.newestBundle(t) },
		"old bundle":      func(f *folder) string { return f.path(logstore.LogDirName, layout.EntriesPath(0, 0)) },
		"newest tile":     func(f *folder) string { return f.tile(t, 0, 1) },
		"old tile":        func(f *folder) string { return f.path(logstore.LogDirName, layout.TilePath(0, 0, 0)) },
		"level-1 tile":    func(f *folder) string { return f.tile(t, 1, 0) },
		"signing key":     func(f *folder) string { return f.path(logstore.SigningKeyFileName) },
		"verifier key":    func(f *folder) string { return f.path(logstore.VerifierKeyName) },
		"origin":          func(f *folder) string { return f.path(logstore.OriginFileName) },
		"tessera version": func(f *folder) string { return f.path(logstore.LogDirName, ".state", "version") },
		"state cache":     func(f *folder) string { return f.path(logstore.StateFileName) },
	}
	damages := map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"flipped":   func(b []byte) []byte { b = append([]byte(nil), b...); b[len(b)/3] ^= 0x04; return b },
	}
	base := newFolder(t, 300)
	for kind, fileOf := range kinds {
		for how, damage := range damages {
			t.Run(kind+"/"+how, func(t *testing.T) {
				f := &folder{dir: t.TempDir(), receipts: base.receipts, pub: base.pub}
				if err := os.CopyFS(f.dir, os.DirFS(base.dir)); err != nil {
					t.Fatal(err)
				}
				os.Chmod(f.path(logstore.SigningKeyFileName), 0o600)
				os.Remove(f.path(logstore.LockFileName))
				file := fileOf(f)
				raw, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, damage(raw), 0o600); err != nil {
					t.Fatal(err)
				}
				k, err := Open(testConfig(t, f.dir))
				if err != nil {
					if !strings.Contains(err.Error(), file) && !strings.Contains(err.Error(), filepath.Base(file)) {
						t.Fatalf("refused without naming %s: %v", file, err)
					}
					return
				}
				<-k.scrubbed
				if err := k.Ready(); err != nil {
					k.Close()
					if !strings.Contains(err.Error(), file) {
						t.Fatalf("stopped writes without naming %s: %v", file, err)
					}
					return
				}
				k.Close()
				f.sound(t)
			})
		}
	}
}

// A hash tile truncated under a running kernel that writes through
// Tessera: the next write fails, and instead of resuming onto it the kernel
// says which file is damaged and stays stopped; repair and a restart bring
// it back. (With the write-ahead log the tile writer never reads the tiles
// back: TestWriteAhead_TileDamagedWhileRunningIsNotBuiltOn.)
func TestTileDamagedWhileRunningStopsWritesNamingIt(t *testing.T) {
	f := newFolder(t, 5)
	cfg := testConfig(t, f.dir)
	cfg.DisableWriteAhead = true
	k := openTestConfig(t, cfg)
	defer k.Close()
	tile := f.tile(t, 0, 0)
	raw, _ := os.ReadFile(tile)
	if err := os.WriteFile(tile, raw[:len(raw)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	root := rootOf(t, k)
	if _, err := k.Submit(context.Background(), root, ActionRequest{Type: event.Observe, Target: "workspace/late"}); !errors.Is(err, logstore.ErrUnavailable) {
		t.Fatalf("a write onto a truncated tile: %v", err)
	}
	waitReadiness(t, k, "the kernel stops, naming the truncated tile and annald repair", func(err error) bool {
		return err != nil && strings.Contains(err.Error(), tile) && strings.Contains(err.Error(), "annald repair")
	})
	if err := k.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if _, err := repair(t, f); err != nil {
		t.Fatal(err)
	}
	k2 := f.sound(t)
	if _, err := k2.Submit(context.Background(), rootOf(t, k2), ActionRequest{Type: event.Observe, Target: "workspace/after"}); err != nil {
		t.Fatal(err)
	}
}

// With the write-ahead log, a hash tile truncated under a running kernel:
// the action is answered (the write-ahead log holds it), the next write of
// the tiles finds the damage and the kernel stops, naming the file; repair
// and a restart bring it back, and the answered entry lands at its index.
func TestWriteAhead_TileDamagedWhileRunningStopsWritesNamingIt(t *testing.T) {
	f := newFolder(t, 5)
	k := openTest(t, f.dir)
	tile := f.tile(t, 0, 0)
	raw, _ := os.ReadFile(tile)
	if err := os.WriteFile(tile, raw[:len(raw)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rc, err := k.Submit(ctx, rootOf(t, k), ActionRequest{Type: event.Observe, Target: "workspace/late"})
	if err != nil {
		t.Fatal(err)
	}
	waitReadiness(t, k, "the kernel stops, naming the truncated tile and annald repair", func(err error) bool {
		return err != nil && strings.Contains(err.Error(), tile) && strings.Contains(err.Error(), "annald repair")
	})
	if _, err := k.Submit(ctx, rootOf(t, k), ActionRequest{Type: event.Observe, Target: "workspace/later"}); !errors.Is(err, logstore.ErrUnavailable) {
		t.Fatalf("an action on a damaged log: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if _, err := repair(t, f); err != nil {
		t.Fatal(err)
	}
	k2 := f.sound(t)
	entry, err := k2.Entry(ctx, rc.Index)
	if err != nil {
		t.Fatal(err)
	}
	if leaf := event.LeafHash(entry); hex.EncodeToString(leaf[:]) != rc.LeafHash {
		t.Fatalf("entry %d after repair and restart is not the answered one", rc.Index)
	}
	next, err := k2.Submit(ctx, rootOf(t, k2), ActionRequest{Type: event.Observe, Target: "workspace/after"})
	if err != nil || next.Index != rc.Index+1 {
		t.Fatalf("after repair: %+v, %v", next, err)
	}
}

// Tessera's clean-up removes the partial bundles and tiles that full ones
// replaced, soon enough that they do not pile up; proofs at old sizes (whose
// partial tiles went) still build, from the full tiles.
func TestPartialTilesAreCollected(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.GCInterval = 100 * time.Millisecond
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	root := rootOf(t, k)
	ctx := context.Background()
	var oldSizes []uint64
	for i := range 600 {
		rc, err := k.Submit(ctx, root, ActionRequest{Type: event.Observe, Target: fmt.Sprintf("workspace/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if i%97 == 0 {
			oldSizes = append(oldSizes, rc.Index+1)
		}
	}
	logPath := k.LogPath()
	partials := func() []string {
		var found []string
		for _, dir := range []string{layout.EntriesPath(0, 0), layout.EntriesPath(1, 0), layout.TilePath(0, 0, 0), layout.TilePath(0, 1, 0)} {
			if _, err := os.Stat(filepath.Join(logPath, dir+".p")); err == nil {
				found = append(found, dir+".p")
			}
		}
		return found
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(partials()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("partials of full bundles and tiles still there: %v", partials())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, size := range oldSizes {
		if _, err := k.log.InclusionProof(ctx, size-1, size); err != nil {
			t.Fatalf("proof at old size %d after clean-up: %v", size, err)
		}
		if _, err := k.log.ConsistencyProof(ctx, size, 600); err != nil {
			t.Fatalf("consistency from old size %d after clean-up: %v", size, err)
		}
	}
}

// A data folder whose log folder went, keys and all else kept, would make a
// second history under the same key: refused.
func TestLostLogFolderIsNotStartedAgain(t *testing.T) {
	f := newFolder(t, 2)
	if err := os.RemoveAll(f.path(logstore.LogDirName)); err != nil {
		t.Fatal(err)
	}
	os.Remove(f.path(logstore.StateFileName))
	f.refuses(t, f.path(logstore.LogDirName, logstore.TreeStatePath), "fork")
}
