package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"
)

// testLog is a real log: an RFC 6962 tree and an Ed25519 key whose name is
// the origin, signing checkpoints with checkpoints.SignCheckpoint.
type testLog struct {
	t      testing.TB
	origin string
	signer note.Signer
	vkey   string
	tree   *testonly.Tree
}

func newTestLog(t testing.TB, origin string) *testLog {
	t.Helper()
	skey, vkey, err := checkpoints.GenerateLogKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := checkpoints.NewLogSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{t: t, origin: origin, signer: signer, vkey: vkey, tree: testonly.New(rfc6962.DefaultHasher)}
}

// fork returns a log with the same origin and key whose tree holds the same
// first n entries as l and then different ones: the split view a lying log
// would show.
func (l *testLog) fork(n uint64) *testLog {
	f := &testLog{t: l.t, origin: l.origin, signer: l.signer, vkey: l.vkey, tree: testonly.New(rfc6962.DefaultHasher)}
	for i := range n {
		f.tree.Append(l.tree.LeafHash(i))
	}
	return f
}

// growTo appends entries until the tree has size entries. The entries of a
// fork differ from the original's by their prefix.
func (l *testLog) growTo(size uint64) *testLog {
	for l.tree.Size() < size {
		l.tree.AppendData(fmt.Appendf(nil, "%p entry %d", l, l.tree.Size()))
	}
	return l
}

func (l *testLog) root(size uint64) [sha256.Size]byte { return [32]byte(l.tree.HashAt(size)) }

// checkpoint signs the checkpoint of the tree at size.
func (l *testLog) checkpoint(size uint64) []byte {
	return l.signWith(l.signer, checkpoints.Checkpoint{Origin: l.origin, Size: size, Hash: l.root(size)})
}

func (l *testLog) signWith(s note.Signer, c checkpoints.Checkpoint) []byte {
	l.t.Helper()
	n, err := note.Sign(&note.Note{Text: string(c.Marshal())}, s)
	if err != nil {
		l.t.Fatal(err)
	}
	return n
}

func (l *testLog) proof(old, size uint64) [][sha256.Size]byte {
	l.t.Helper()
	if old == 0 {
		return nil
	}
	p, err := l.tree.ConsistencyProof(old, size)
	if err != nil {
		l.t.Fatal(err)
	}
	out := make([][sha256.Size]byte, len(p))
	for i := range p {
		out[i] = [32]byte(p[i])
	}
	return out
}

// request is the add-checkpoint body an honest client sends to move the
// witness from old to size.
func (l *testLog) request(old, size uint64) []byte {
	return requestBody(old, l.proof(old, size), l.checkpoint(size))
}

func requestBody(old uint64, proof [][sha256.Size]byte, signed []byte) []byte {
	return AddCheckpointRequest{OldSize: old, Proof: proof, SignedCheckpoint: signed}.Marshal()
}

func (l *testLog) config() LogConfig { return LogConfig{Origin: l.origin, Keys: []string{l.vkey}} }

// testWitness is a witness over a data folder, served by httptest.
type testWitness struct {
	t        testing.TB
	dir      string
	store    *Store
	w        *Witness
	srv      *httptest.Server
	logs     *syncBuffer
	stopOnce sync.Once
}

const testWitnessName = "witness.test/w1"

func startWitness(t testing.TB, dir string, opts Options) *testWitness {
	t.Helper()
	return startNamedWitness(t, dir, testWitnessName, opts)
}

// startNamedWitness is startWitness with a witness name of one's own, for
// tests with several witnesses.
func startNamedWitness(t testing.TB, dir, name string, opts Options) *testWitness {
	t.Helper()
	skey, _, err := LoadOrCreateKey(filepath.Join(dir, KeyFileName), name)
	if err != nil {
		t.Fatal(err)
	}
	cosigner, err := NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	store, err := OpenStore(filepath.Join(dir, StateFileName), 0)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	w, err := New(store, cosigner, opts)
	if err != nil {
		t.Fatal(err)
	}
	tw := &testWitness{t: t, dir: dir, store: store, w: w, srv: httptest.NewServer(w.Handler()), logs: logs}
	t.Cleanup(tw.stop)
	return tw
}

func (tw *testWitness) stop() {
	tw.stopOnce.Do(func() {
		tw.srv.Close()
		tw.w.Close()
		if err := tw.store.Close(); err != nil {
			tw.t.Error(err)
		}
	})
}

func (tw *testWitness) addLog(l *testLog) {
	tw.t.Helper()
	if err := tw.store.AddLog(l.config()); err != nil {
		tw.t.Fatal(err)
	}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (tw *testWitness) post(body []byte) answer {
	tw.t.Helper()
	resp, err := http.Post(tw.srv.URL+"/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		tw.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tw.t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func (tw *testWitness) get(path string) answer {
	tw.t.Helper()
	resp, err := http.Get(tw.srv.URL + path)
	if err != nil {
		tw.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tw.t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func checkpointPath(origin string) string {
	id := LogID(origin)
	return "/" + hex.EncodeToString(id[:]) + "/checkpoint"
}

// mustCosign posts a request and fails the test unless it is cosigned.
func (tw *testWitness) mustCosign(body []byte) answer {
	tw.t.Helper()
	a := tw.post(body)
	if a.status != http.StatusOK {
		tw.t.Fatalf("add-checkpoint: %d %q, want 200", a.status, a.body)
	}
	return a
}

// storedSize is the size of the origin's latest cosigned checkpoint, or -1.
func (tw *testWitness) storedSize(origin string) int64 {
	tw.t.Helper()
	cp, err := tw.store.Latest(LogID(origin))
	if err != nil {
		return -1
	}
	return int64(cp.Size)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func mustVerifierTB(t testing.TB, vkey string) note.Verifier {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
