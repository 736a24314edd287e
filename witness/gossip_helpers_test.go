package witness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/verifier"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/storage/posix"
	"k8s.io/klog/v2"
)

// tileServer serves a testLog as a c2sp.org/tlog-tiles log of some size
// would: its full tiles, its partial tiles at that size, and its signed
// checkpoint. Tiles are computed from the tree, not taken from a log
// implementation.
type tileServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
}

func serveTiles(t testing.TB, l *testLog, size uint64) *tileServer {
	t.Helper()
	ts := &tileServer{}
	ts.publish(l, size)
	ts.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		f, ok := ts.files[strings.TrimPrefix(r.URL.Path, "/")]
		ts.mu.Unlock()
		if !ok {
			http.NotFound(rw, r)
			return
		}
		rw.Write(f)
	}))
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *tileServer) url() string { return ts.srv.URL + "/" }

// publish makes the server show l at size: partial tiles of an earlier
// size are gone, as a log's are once their tile is full.
func (ts *tileServer) publish(l *testLog, size uint64) {
	files := map[string][]byte{"checkpoint": l.checkpoint(size)}
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	for level := uint64(0); level < 8 && size>>(8*level) > 0; level++ {
		nodes := size >> (8 * level)
		for index := uint64(0); index*256 < nodes; index++ {
			width := min(256, nodes-index*256)
			var tile []byte
			for k := index * 256; k < index*256+width; k++ {
				r := rf.NewEmptyRange(k << (8 * level))
				for i := k << (8 * level); i < (k+1)<<(8*level); i++ {
					if err := r.Append(l.tree.LeafHash(i), nil); err != nil {
						panic(err)
					}
				}
				// A perfect subtree's compact range is its root alone.
				tile = append(tile, r.Hashes()[0]...)
			}
			p := uint8(0)
			if width < 256 {
				p = uint8(width)
			}
			files[layout.TilePath(level, index, p)] = tile
		}
	}
	ts.mu.Lock()
	ts.files = files
	ts.mu.Unlock()
}

// serveTesseraLog runs a real Tessera POSIX log holding entries, signed by
// l's key, waits until it has published a checkpoint of all of them, and
// serves its folder over HTTP, as a static tlog-tiles log is served. It
// returns the log's URL and its published checkpoint.
func serveTesseraLog(t *testing.T, l *testLog, entries [][]byte) (string, []byte) {
	t.Helper()
	if !testing.Verbose() {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	driver, err := posix.New(ctx, posix.Config{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(l.signer).
		WithBatching(256, 5*time.Millisecond).
		WithCheckpointInterval(100 * time.Millisecond)
	appender, shutdown, reader, err := tessera.NewAppender(ctx, driver, opts)
	if err != nil {
		t.Fatal(err)
	}
	awaiter := tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, 10*time.Millisecond)
	var last tessera.IndexFuture
	for _, e := range entries {
		last = appender.Add(ctx, tessera.NewEntry(e))
	}
	if _, _, err := awaiter.Await(ctx, last); err != nil {
		t.Fatal(err)
	}
	// Tessera publishes on its own schedule: wait for the checkpoint of
	// every entry, not only the one that covers the last index.
	var published []byte
	for {
		if published, err = reader.ReadCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
		cp, err := ParseSignedCheckpoint(published)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Size == uint64(len(entries)) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Tessera published size %d, not %d", cp.Size, len(entries))
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL + "/", published
}

// startGossipGroup starts n witnesses named witness.test/g1…gn, each
// witnessing cfg and with every other one as a peer.
func startGossipGroup(t *testing.T, n int, cfg LogConfig, opts Options) []*testWitness {
	t.Helper()
	ws := make([]*testWitness, n)
	for i := range ws {
		ws[i] = startNamedWitness(t, t.TempDir(), fmt.Sprintf("witness.test/g%d", i+1), opts)
		if err := ws[i].store.AddLog(cfg); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range ws {
		for j, b := range ws {
			if i != j {
				a.addPeer(b.srv.URL, b.w.Cosigner().VerifierKey())
			}
		}
	}
	return ws
}

func (tw *testWitness) addPeer(url, key string) {
	tw.t.Helper()
	p, err := NewPeerConfig(url, key)
	if err != nil {
		tw.t.Fatal(err)
	}
	if err := tw.store.AddPeer(p); err != nil {
		tw.t.Fatal(err)
	}
}

// evidence returns the witness's evidence files by ID, each checked with
// the offline verifier against the log key vkey.
func (tw *testWitness) evidence(vkey string) map[string]*verifier.EvidenceResult {
	tw.t.Helper()
	list, err := tw.store.Evidence()
	if err != nil {
		tw.t.Fatal(err)
	}
	out := map[string]*verifier.EvidenceResult{}
	for _, rec := range list {
		file, err := tw.store.EvidenceFile(rec.ID)
		if err != nil {
			tw.t.Fatal(err)
		}
		res, err := verifier.VerifyEvidence(file, vkey)
		if err != nil {
			tw.t.Fatalf("evidence %s does not verify: %v\n%s", rec.ID, err, file)
		}
		if res.Sizes != rec.Sizes || res.Origin != rec.Origin {
			tw.t.Errorf("evidence %s: record says %v %q, file %v %q", rec.ID, rec.Sizes, rec.Origin, res.Sizes, res.Origin)
		}
		out[rec.ID] = res
	}
	return out
}

// gossip runs one round and fails the test on a round that checked
// nothing it was expected to.
func (tw *testWitness) gossip() GossipReport {
	tw.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return tw.w.Gossip(ctx)
}
