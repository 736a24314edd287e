package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	bolt "go.etcd.io/bbolt"
)

// stateFolder is a closed data folder whose state cache holds actors,
// envelopes and actions, and a copy of its state file.
func stateFolder(t *testing.T) (*folder, []byte) {
	t.Helper()
	g := openGov(t)
	dir := g.dir.Path
	for i := range 20 {
		agent, _ := g.agent(100, "workspace/**:observe")
		if _, err := g.submit(agent, event.Observe, fmt.Sprintf("workspace/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	f := &folder{dir: dir}
	raw, err := os.ReadFile(f.path(logstore.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	return f, raw
}

// openDamaged writes state into the folder, opens it, and checks that the
// kernel started with state equal to the log's replay; it reports whether
// the file was set aside as damaged.
func openDamaged(t *testing.T, f *folder, state []byte) (setAside bool) {
	t.Helper()
	os.Remove(f.path(logstore.StateFileName + ".damaged"))
	if err := os.WriteFile(f.path(logstore.StateFileName), state, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := Open(testConfig(t, f.dir))
	if err != nil {
		t.Fatalf("open with a damaged state file: %v", err)
	}
	defer k.Close()
	if diff, err := k.stateMatchesReplay(context.Background()); err != nil || diff != nil {
		t.Fatalf("state differs from the log's replay: %v %v", diff, err)
	}
	_, err = os.Stat(f.path(logstore.StateFileName + ".damaged"))
	return err == nil
}

// A damaged state cache never crashes annald: it is detected, set aside
// and rebuilt from the log.
func TestDamagedStateCacheIsRebuiltNotACrash(t *testing.T) {
	f, good := stateFolder(t)
	page := 4096
	used := usedBytes(t, good)
	cases := map[string][]byte{
		"empty":          {},
		"one page":       good[:page],
		"a quarter":      good[:len(good)/4],
		"half":           good[:len(good)/2],
		"three quarters": good[:3*len(good)/4],
		"a page short":   good[:len(good)-page],
		"zeros":          make([]byte, len(good)),
		"garbage":        []byte(strings.Repeat("not a bbolt file ", 1000)),
	}
	for name, state := range cases {
		t.Run(name, func(t *testing.T) {
			setAside := openDamaged(t, f, state)
			// bbolt grows its file ahead of use: a cut beyond its
			// high-water page may remove nothing it wrote.
			if len(state) > 0 && len(state) < used && !setAside {
				t.Fatal("a damaged state file was not set aside")
			}
		})
	}
}

// A byte flipped anywhere in the state file: annald starts, and its state
// equals the log's replay, whether the flip was found (and the file set
// aside) or landed where nothing reads it.
func TestStateCacheByteFlipsAreFoundOrHarmless(t *testing.T) {
	f, good := stateFolder(t)
	found := 0
	step := len(good) / 60
	for off := 0; off < len(good); off += step {
		state := append([]byte(nil), good...)
		state[off] ^= 0x10
		if openDamaged(t, f, state) {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no flip was found: the checks read nothing")
	}
	t.Logf("%d of %d flips were found; the rest landed where nothing reads", found, len(good)/step+1)
}

// A state file of another history of the same origin (a restored older
// copy, say) is found by its last folded entry and rebuilt.
func TestStateCacheOfAnotherHistoryIsRebuilt(t *testing.T) {
	f, _ := stateFolder(t)
	k := openTest(t, f.dir)
	k.Close()
	// Rewrite the fold record as another history's: same size, other leaf.
	c, err := history.OpenStateCache(f.path(logstore.StateFileName), strings.TrimSpace(readFile(t, f.path(logstore.OriginFileName))))
	if err != nil || c.Damaged != nil {
		t.Fatalf("%v %v", err, c.Damaged)
	}
	c.Folded.Leaf[0] ^= 1
	if err := c.Store.Write(nil, nil, c.Folded); err != nil {
		t.Fatal(err)
	}
	c.Store.Close()
	if !openDamaged(t, f, []byte(readFile(t, f.path(logstore.StateFileName)))) {
		t.Fatal("the state of another history was not set aside")
	}
	if _, err := Rebuild(context.Background(), testConfig(t, f.dir)); err != nil {
		t.Fatal(err)
	}
}

func TestRebuildOfADamagedStateReportsIt(t *testing.T) {
	f, good := stateFolder(t)
	// Its two meta pages and nothing else: half the file was not enough
	// when the pages past the half happened to be free ones.
	os.WriteFile(f.path(logstore.StateFileName), good[:2*os.Getpagesize()], 0o600)
	r, err := Rebuild(context.Background(), testConfig(t, f.dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Differences) != 1 || !strings.Contains(r.Differences[0], "damaged") {
		t.Fatalf("rebuild of a truncated state: %+v", r)
	}
	if r, err := Rebuild(context.Background(), testConfig(t, f.dir)); err != nil || len(r.Differences) != 0 {
		t.Fatalf("rebuild after rebuild: %+v %v", r, err)
	}
	if _, err := os.Stat(f.path(logstore.StateFileName + ".damaged")); errors.Is(err, os.ErrNotExist) {
		t.Fatal("the damaged state was not kept aside")
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzStateFile: whatever bytes the state file holds, opening it never
// crashes: it loads, or it is reported damaged.
func FuzzStateFile(f *testing.F) {
	dir := f.TempDir()
	k, err := Open(testConfig(f, dir))
	if err != nil {
		f.Fatal(err)
	}
	k.Close()
	good, err := os.ReadFile(dir + "/" + logstore.StateFileName)
	if err != nil {
		f.Fatal(err)
	}
	origin := k.Origin() // the seed's own, so that fuzzed files are read, not refused at their name
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:4096*2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, state []byte) {
		path := t.TempDir() + "/state.db"
		if err := os.WriteFile(path, state, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := history.LoadStateFile(path, origin)
		var damage *logstore.DamageError
		switch {
		case err == nil:
			c.Store.Close()
		case errors.As(err, &damage), strings.Contains(err.Error(), "belongs to log"):
		default:
			t.Fatalf("neither loaded nor reported damaged: %v", err)
		}
	})
}

// usedBytes is how far a bbolt file's pages reach (its high-water mark).
func usedBytes(t *testing.T, state []byte) int {
	t.Helper()
	p := t.TempDir() + "/copy.db"
	if err := os.WriteFile(p, state, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var used int64
	db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	return int(used)
}

// A state write that fails keeps its keys for the next: otherwise the fold
// record of a later write would cover values the file never got.
func TestFailedStateWriteIsRetried(t *testing.T) {
	g := openGov(t, func(c *Config) { c.FoldInterval = time.Hour })
	if err := g.persist(); err != nil {
		t.Fatal(err)
	}
	agent, _ := g.agent(100, "workspace/**:observe") // dirty only now
	real := g.store.DB
	roPath := filepath.Join(t.TempDir(), "ro.db")
	ro, err := bolt.Open(roPath, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	ro.Close()
	ro, err = bolt.Open(roPath, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	g.store.DB = ro // every write now fails
	if err := g.persist(); err == nil {
		t.Fatal("a write to a read-only state succeeded")
	}
	ro.Close()
	g.store.DB = real
	if _, err := g.submit(g.root, event.Observe, "workspace/after"); err != nil {
		t.Fatal(err)
	}
	if err := g.persist(); err != nil {
		t.Fatal(err)
	}
	g.store.DB.View(func(tx *bolt.Tx) error {
		if tx.Bucket(history.BucketLedger).Get([]byte("actor/"+agent.ID)) == nil {
			t.Errorf("the agent created before the failed write is not in the state file")
		}
		return nil
	})
}
