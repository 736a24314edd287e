package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	bolt "go.etcd.io/bbolt"
)

// stateFileContents reads every key and value of the state file's buckets
// (its ledger, its history index, its meta), bucket/key -> value.
func stateFileContents(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				out[string(name)+"/"+string(k)] = string(v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRebuildWritesTheStateFileTheKernelWrote: annald rebuild, which
// replays the log into a fresh state, writes the state file the kernel
// wrote as it went, key for key and byte for byte — the ledger, the fold
// record and every history index key — and the history answers the same.
func TestRebuildWritesTheStateFileTheKernelWrote(t *testing.T) {
	g, a, b := historyLog(t)
	queries := []HistoryQuery{{}, {Actor: a.ID}, {Actor: b.ID}, {Outcome: OutcomeDenied}, {Outcome: OutcomeHeld}, {TargetPrefix: "workspace/b/"}}
	var before [][]uint64
	for _, q := range queries {
		before = append(before, pages(t, g.Kernel, g.root, q))
	}
	dir, statePath := g.dir.Path, g.dir.StatePath()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	written := stateFileContents(t, statePath)
	indexBytes := 0 // a byte or more an indexed term of an event
	for k, v := range written {
		if strings.HasPrefix(k, "history/") {
			indexBytes += len(v)
		}
	}
	if indexBytes < 50 {
		t.Fatalf("the kernel wrote %d bytes of history index; the test proves little", indexBytes)
	}
	rep, err := Rebuild(context.Background(), testConfig(t, dir))
	if err != nil || len(rep.Differences) > 0 {
		t.Fatalf("rebuild: %v, %v", rep, err)
	}
	rebuilt := stateFileContents(t, statePath)
	if !maps.Equal(written, rebuilt) {
		for _, k := range slices.Sorted(maps.Keys(written)) {
			if rebuilt[k] != written[k] {
				t.Errorf("%q: the kernel wrote %x, the rebuild %x", k, written[k], rebuilt[k])
			}
		}
		for k := range rebuilt {
			if _, ok := written[k]; !ok {
				t.Errorf("%q: only the rebuild wrote it", k)
			}
		}
		t.Fatal("the rebuilt state file differs from the kernel's")
	}
	k := openTest(t, dir)
	defer k.Close()
	root := rootOf(t, k)
	for i, q := range queries {
		if got := pages(t, k, root, q); !slices.Equal(got, before[i]) {
			t.Errorf("query %+v after the rebuild: %v, before %v", q, got, before[i])
		}
	}
}

// TestRebuildThatFailsLeavesTheStateFileAsItWas: a rebuild writes its
// state into a file of its own and puts it in place only once the whole
// log has folded; one that stops at an entry it cannot parse leaves the
// kernel's state file untouched, and nothing of its own behind.
func TestRebuildThatFailsLeavesTheStateFileAsItWas(t *testing.T) {
	g := openGov(t)
	a, _ := g.agent(1_000_000, "workspace/**:observe")
	for i := range 300 { // a full first entry bundle, which the start-up check does not read
		g.submit(a, event.Observe, fmt.Sprintf("workspace/a/%d", i))
	}
	dir, statePath := g.dir.Path, g.dir.StatePath()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	written := stateFileContents(t, statePath)
	// In the first, full, entry bundle an entry becomes one of event
	// version 2, which the replay cannot parse.
	full := filepath.Join(dir, logstore.LogDirName, "tile", "entries", "000")
	raw, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Replace(raw, []byte(`"v":1}`), []byte(`"v":2}`), 1)
	if bytes.Equal(damaged, raw) {
		t.Fatal("nothing to change in the first entry bundle")
	}
	if err := os.WriteFile(full, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Rebuild(context.Background(), testConfig(t, dir)); err == nil || !strings.Contains(err.Error(), "replay the log") {
		t.Fatalf("a rebuild of a log with a changed entry: %v, want its replay to fail", err)
	}
	if got := stateFileContents(t, statePath); !maps.Equal(got, written) {
		t.Fatal("the failed rebuild changed the state file")
	}
	if _, err := os.Stat(statePath + ".rebuild"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed rebuild left its file: %v", err)
	}
}
