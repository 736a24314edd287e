package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
)

// TestCollectedPartialTilesServedFromFull: a client holding a checkpoint
// of size N asks for the partial tiles of width N%256. Once the bundle is
// full, Tessera's garbage collector deletes them; the server answers with
// the full tile's prefix, the same bytes as before, so a client that does
// not fall back to the full tile itself still builds proofs at size N.
func TestCollectedPartialTilesServedFromFull(t *testing.T) {
	ts := newTestServer(t, func(c *kernel.Config) { c.GCInterval = 100 * time.Millisecond })
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := ts.root.Submit(ctx, api.ActionRequest{Type: "observe", Target: "workspace"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.root.SubmitAndWait(ctx, api.ActionRequest{Type: "observe", Target: "workspace"}); err != nil {
		t.Fatal(err)
	}
	old, err := ts.k.LatestCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if old.Size == 0 || old.Size >= layout.EntryBundleWidth {
		t.Fatalf("checkpoint size %d, want a partial first bundle", old.Size)
	}
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(ts.srv.URL + "/" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	w := uint8(old.Size)
	paths := []string{layout.TilePath(0, 0, w), layout.EntriesPath(0, w)}
	before := map[string][]byte{}
	for _, p := range paths {
		status, body := get(p)
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d before the bundle is full", p, status)
		}
		before[p] = body
	}

	// Fill the first bundle, publish past it, wait (bounded) for the collector.
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if _, err := ts.root.Submit(ctx, api.ActionRequest{Type: "observe", Target: fmt.Sprintf("workspace/%d/%d", w, i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if _, err := ts.root.SubmitAndWait(ctx, api.ActionRequest{Type: "observe", Target: "workspace"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for gcFromSize(t, ts.k.LogPath()) < layout.EntryBundleWidth {
		if time.Now().After(deadline) {
			t.Fatal("garbage collection did not pass the first bundle within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(ts.k.LogPath(), p)); !os.IsNotExist(err) {
			t.Fatalf("%s still on disk after collection: %v", p, err)
		}
		status, body := get(p)
		if status != http.StatusOK || string(body) != string(before[p]) {
			t.Fatalf("GET %s after collection = %d, %d bytes; want 200 and the %d bytes served before", p, status, len(body), len(before[p]))
		}
	}

	// A client that asks only for exact paths (no fallback of its own)
	// proves inclusion at the old size against the old root.
	exact := func(ctx context.Context, level, index uint64, p uint8) ([]byte, error) {
		status, body := get(layout.TilePath(level, index, p))
		if status != http.StatusOK {
			return nil, fmt.Errorf("tile %d/%d.p/%d: %d", level, index, p, status)
		}
		return body, nil
	}
	pb, err := client.NewProofBuilder(ctx, old.Size, exact)
	if err != nil {
		t.Fatal(err)
	}
	idx := old.Size - 1
	hashes, err := pb.InclusionProof(ctx, idx)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := ts.k.Entry(ctx, idx)
	if err != nil {
		t.Fatal(err)
	}
	leaf := event.LeafHash(entry)
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, idx, old.Size, leaf[:], hashes, old.Hash[:]); err != nil {
		t.Fatalf("inclusion of %d at the old size %d: %v", idx, old.Size, err)
	}

	// A partial of a tile that was never written is not made up.
	if status, _ := get(layout.TilePath(0, 5, 3)); status != http.StatusNotFound {
		t.Fatalf("partial of a tile that does not exist: %d, want 404", status)
	}
}

func TestPartialOf(t *testing.T) {
	bundle := []byte{0, 1, 'a', 0, 2, 'b', 'c', 0, 0, 0, 1, 'd'}
	for w, want := range map[uint8]string{1: "\x00\x01a", 2: "\x00\x01a\x00\x02bc", 3: "\x00\x01a\x00\x02bc\x00\x00", 4: string(bundle)} {
		got, err := partialOf(bundle, w, true)
		if err != nil || string(got) != want {
			t.Errorf("bundle prefix of width %d = %q, %v; want %q", w, got, err, want)
		}
	}
	if _, err := partialOf(bundle, 5, true); err == nil {
		t.Error("width 5 of a 4-entry bundle: no error")
	}
	if _, err := partialOf([]byte{0, 5, 'a'}, 1, true); err == nil {
		t.Error("entry longer than the bundle: no error")
	}
	tile := make([]byte, 256*32)
	for i := range tile {
		tile[i] = byte(i / 32)
	}
	got, err := partialOf(tile, 3, false)
	if err != nil || len(got) != 96 || got[95] != 2 {
		t.Errorf("tile prefix of width 3: %d bytes, %v", len(got), err)
	}
	if _, err := partialOf(tile[:64], 3, false); err == nil {
		t.Error("width 3 of a 2-hash tile: no error")
	}
}

// gcFromSize is how far Tessera's garbage collector has got: every full
// bundle below it has had its partials removed. It reads Tessera's own
// state file (storage/posix, v1.0.4).
func gcFromSize(t *testing.T, logPath string) uint64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(logPath, ".state", "gcState"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		FromSize uint64 `json:"fromSize"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("gcState %q: %v", raw, err)
	}
	return st.FromSize
}
