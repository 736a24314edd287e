package witness

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/verifier"
)

// startMLDSAWitness is startNamedWitness with an ML-DSA-44 key as well.
func startMLDSAWitness(t *testing.T, name string) *testWitness {
	t.Helper()
	dir := t.TempDir()
	tw := startNamedWitness(t, dir, name, Options{})
	mkey, created, err := LoadOrCreateMLDSAKey(filepath.Join(dir, MLDSAKeyFileName), name)
	if err != nil || !created {
		t.Fatalf("ML-DSA-44 key: created %v, %v", created, err)
	}
	c, err := tw.w.Cosigner().WithMLDSA(mkey)
	if err != nil {
		t.Fatal(err)
	}
	tw.w.cosigner = c
	return tw
}

func TestMLDSAKey_CreatedOnceNamedAsTheWitness(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, MLDSAKeyFileName)
	skey, created, err := LoadOrCreateMLDSAKey(path, "witness.example.com/w1")
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v, want mode 0600", info, err)
	}
	again, created, err := LoadOrCreateMLDSAKey(path, "witness.example.com/w1")
	if err != nil || created || again != skey {
		t.Fatalf("second start: created %v, same key %v, %v", created, again == skey, err)
	}
	if _, _, err := LoadOrCreateMLDSAKey(path, "witness.example.com/w2"); err == nil || !strings.Contains(err.Error(), `named "witness.example.com/w1"`) {
		t.Errorf("another name: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateMLDSAKey(path, "witness.example.com/w1"); err == nil || !strings.Contains(err.Error(), "mode 0644") {
		t.Errorf("key readable by others: %v", err)
	}

	// An Ed25519 key is not an ML-DSA-44 key, and the two keys of a
	// witness bear one name.
	edPath := filepath.Join(dir, KeyFileName)
	edKey, _, err := LoadOrCreateKey(edPath, "witness.example.com/w2")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateMLDSAKey(edPath, "witness.example.com/w2"); err == nil {
		t.Error("an Ed25519 key file was taken as ML-DSA-44")
	}
	c, err := NewCosigner(edKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WithMLDSA(skey); err == nil || !strings.Contains(err.Error(), "one name") {
		t.Errorf("ML-DSA-44 key of another name: %v", err)
	}
	if _, err := c.WithMLDSA(edKey); err == nil {
		t.Error("an Ed25519 key taken as the ML-DSA-44 key")
	}
}

// TestMLDSA_CosignatureIsTwoLines: a witness with both keys answers with
// one line by each; each verifies on its own under the verifier key it
// prints (transparency-dev/formats, and annal-verify's policy), and the
// monitoring endpoint serves both.
func TestMLDSA_CosignatureIsTwoLines(t *testing.T) {
	l := newTestLog(t, "example.com/pq").growTo(10)
	tw := startMLDSAWitness(t, "witness.test/pq")
	tw.addLog(l)
	c := tw.w.Cosigner()
	if len(c.VerifierKeys()) != 2 || c.VerifierKeys()[1] != c.MLDSAVerifierKey() {
		t.Fatalf("verifier keys %v", c.VerifierKeys())
	}
	a := tw.mustCosign(l.request(0, 10))
	lines := strings.Split(strings.TrimSuffix(a.body, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("answer has %d lines, want 2:\n%s", len(lines), a.body)
	}
	cosigned := append(l.checkpoint(10), a.body...)
	for _, vkey := range c.VerifierKeys() {
		v, err := fnote.NewVerifierForCosignatureV1(vkey)
		if err != nil {
			t.Fatal(err)
		}
		n, err := note.Open(cosigned, note.VerifierList(v))
		if err != nil || len(n.Sigs) != 1 {
			t.Fatalf("cosignature by %.40s…: %v", vkey, err)
		}
	}
	// The ML-DSA-44 line is the second, and alone it is the witness's
	// cosignature for a policy that names only that key.
	p, err := verifier.ParsePolicy([]byte("log " + l.vkey + "\nwitness pq " + c.MLDSAVerifierKey() + "\nquorum pq\n"))
	if err != nil {
		t.Fatal(err)
	}
	mldsaOnly := append(l.checkpoint(10), lines[1]+"\n"...)
	if _, err := p.OpenCheckpoint(mldsaOnly); err != nil {
		t.Errorf("annal-verify policy naming the ML-DSA-44 key: %v", err)
	}
	edOnly := append(l.checkpoint(10), lines[0]+"\n"...)
	if _, err := p.OpenCheckpoint(edOnly); err == nil {
		t.Error("the Ed25519 line met a quorum of the ML-DSA-44 key")
	}
	served := tw.get(checkpointPath(l.origin))
	if served.status != 200 || !strings.HasSuffix(served.body, a.body) {
		t.Errorf("monitoring endpoint: %d %q, want both cosignatures", served.status, served.body)
	}
}

// TestMLDSA_GossipWithPeerNamedByMLDSAKey: peers that know each other only
// by their ML-DSA-44 keys compare checkpoints.
func TestMLDSA_GossipWithPeerNamedByMLDSAKey(t *testing.T) {
	l := newTestLog(t, "example.com/pq-gossip").growTo(300)
	tiles := serveTiles(t, l, 300)
	cfg := LogConfig{Origin: l.origin, Keys: []string{l.vkey}, TileURL: tiles.url()}
	a, b := startMLDSAWitness(t, "witness.test/pq1"), startMLDSAWitness(t, "witness.test/pq2")
	for _, w := range []*testWitness{a, b} {
		if err := w.store.AddLog(cfg); err != nil {
			t.Fatal(err)
		}
	}
	a.addPeer(b.srv.URL, b.w.Cosigner().MLDSAVerifierKey())
	b.addPeer(a.srv.URL, a.w.Cosigner().MLDSAVerifierKey())
	a.mustCosign(l.request(0, 100))
	b.mustCosign(l.request(0, 300))
	// What a reads from b keeps b's ML-DSA-44 cosignature: it verified.
	pv, err := PeerConfig{Name: "witness.test/pq2", Key: b.w.Cosigner().MLDSAVerifierKey()}.verifier()
	if err != nil {
		t.Fatal(err)
	}
	s, err := openServedCheckpoint([]byte(b.get(checkpointPath(l.origin)).body), cfg, pv)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := note.Open(s.note, note.VerifierList(pv)); err != nil || len(n.Sigs) != 1 {
		t.Errorf("b's checkpoint as a read it: %v\n%s", err, s.note)
	}
	for i, w := range []*testWitness{a, b} {
		if r := w.gossip(); r.Consistent != 1 || r.Failed != 0 || len(r.Equivocations) != 0 {
			t.Errorf("witness %d: %+v, want 1 consistent", i+1, r)
		}
	}
}

// newTestMLDSASigner makes an ML-DSA-44 key named name with formats, and
// returns the witness's circl-backed signer of it and formats' verifier.
func newTestMLDSASigner(t *testing.T, name string) (*mldsaSigner, note.Verifier) {
	t.Helper()
	skey, vkey, err := fnote.GenerateMLDSAKey(name)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := fnote.NewMLDSASigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newMLDSASigner(ref.Name(), ref.KeyHash(), mldsaSeed(skey))
	if err != nil {
		t.Fatal(err)
	}
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

// TestMLDSASigner_AsFormatsSignsIt: the circl-backed signer's signatures
// verify under transparency-dev/formats' own ML-DSA-44 verifier, for many
// checkpoints, and bear the name and key hash formats gives the key.
func TestMLDSASigner_AsFormatsSignsIt(t *testing.T) {
	s, v := newTestMLDSASigner(t, "witness.test/circl")
	if v.Name() != s.Name() || v.KeyHash() != s.KeyHash() {
		t.Fatalf("signer %s+%08x, verifier %s+%08x", s.Name(), s.KeyHash(), v.Name(), v.KeyHash())
	}
	for i := range 20 {
		l := newTestLog(t, fmt.Sprintf("example.com/log-%d", i)).growTo(uint64(i + 1))
		msg := l.checkpoint(uint64(i + 1))
		n, err := note.Open(msg, note.VerifierList(mustVerifierTB(t, l.vkey)))
		if err != nil {
			t.Fatal(err)
		}
		signed, err := note.Sign(&note.Note{Text: n.Text}, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := note.Open(signed, note.VerifierList(v)); err != nil {
			t.Fatalf("checkpoint %d: formats' verifier refuses the signature: %v", i, err)
		}
		tampered := []byte(strings.Replace(string(signed), l.origin, l.origin+"x", 1))
		if _, err := note.Open(tampered, note.VerifierList(v)); err == nil {
			t.Fatalf("checkpoint %d: a changed origin still verifies", i)
		}
	}
}

// TestMLDSASigner_LineIsTheLineNoteSignMakes: the line the witness makes
// from a parsed checkpoint, without note.Sign, is a line note.Sign could
// have made: same name, key ID and length, and it verifies under
// transparency-dev/formats' verifier on the checkpoint's text, and under no
// other checkpoint's.
func TestMLDSASigner_LineIsTheLineNoteSignMakes(t *testing.T) {
	s, v := newTestMLDSASigner(t, "witness.test/line")
	l := newTestLog(t, "example.com/line").growTo(7)
	signed := l.checkpoint(7)
	cp, err := ParseSignedCheckpoint(signed)
	if err != nil {
		t.Fatal(err)
	}
	text := noteText(signed)
	line, err := checkpointSignatureLines(text, &cp, []note.Signer{s})
	if err != nil {
		t.Fatal(err)
	}
	viaNote, err := signatureLines(text, []note.Signer{s})
	if err != nil {
		t.Fatal(err)
	}
	prefix := func(b []byte) string { return string(b[:len("— ")+len(s.Name())+1+8]) }
	if len(line) != len(viaNote) || prefix(line) != prefix(viaNote) {
		t.Fatalf("line %q… (%d bytes), note.Sign's %q… (%d bytes)", prefix(line), len(line), prefix(viaNote), len(viaNote))
	}
	if _, err := note.Open([]byte(text+"\n"+string(line)), note.VerifierList(v)); err != nil {
		t.Fatalf("formats' verifier refuses the line: %v", err)
	}
	other := noteText(l.growTo(8).checkpoint(8))
	if _, err := note.Open([]byte(other+"\n"+string(line)), note.VerifierList(v)); err == nil {
		t.Fatal("the line verifies on another checkpoint")
	}
}

// TestMLDSA_AloneSignedBesideTheWrite: a request alone, on a journal whose
// writes can be left under way, gets its ML-DSA-44 line made while its
// checkpoint is written, and the line verifies; a request refused (409)
// gets none, and the refusal changes nothing.
func TestMLDSA_AloneSignedBesideTheWrite(t *testing.T) {
	l := newTestLog(t, "example.com/pq-alone").growTo(30)
	tw := startMLDSAWitness(t, "witness.test/pq-alone")
	if !tw.store.overlapsWrites.Load() {
		t.Skip("no direct writes through AIO here: the line is made on a goroutine of its own")
	}
	tw.addLog(l)
	v, err := fnote.NewVerifierForCosignatureV1(tw.w.Cosigner().MLDSAVerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	old := uint64(0)
	for _, size := range []uint64{10, 20, 30} {
		a := tw.mustCosign(l.request(old, size))
		if _, err := note.Open(append(l.checkpoint(size), a.body...), note.VerifierList(v)); err != nil {
			t.Fatalf("size %d: the ML-DSA-44 line does not verify: %v\n%s", size, err, a.body)
		}
		old = size
	}
	if a := tw.post(l.request(10, 30)); a.status != http.StatusConflict || a.body != "30\n" {
		t.Errorf("stale old size: %d %q, want 409 \"30\\n\"", a.status, a.body)
	}
	if served := tw.get(checkpointPath(l.origin)); served.status != 200 || !strings.Contains(served.body, "\n30\n") {
		t.Errorf("monitoring endpoint after the refusal: %d %q", served.status, served.body)
	}
}
