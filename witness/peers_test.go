package witness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// newPeerKey makes a witness key named name and returns its cosigner.
func newPeerKey(t testing.TB, name string) *Cosigner {
	t.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPeerConfig_Validate(t *testing.T) {
	key := newPeerKey(t, "witness.example/p").VerifierKey()
	l := newTestLog(t, "example.com/log")
	name, hash, b64key := func() (string, string, string) {
		p := strings.SplitN(key, "+", 3)
		return p[0], p[1], p[2]
	}()
	for _, tc := range []struct {
		name, url, key string
		want           string
	}{
		{"ok", "https://witness.example/p", key, ""},
		{"ok with path", "http://127.0.0.1:8080/w/", key, ""},
		{"log key, not cosignature/v1", "https://w.example", l.vkey, "neither a cosignature/v1 Ed25519 key"},
		{"wrong key ID", "https://w.example", name + "+00000000+" + b64key, "key ID 00000000"},
		{"uppercase key ID", "https://w.example", name + "+" + strings.ToUpper(hash) + "+" + b64key, "key ID"},
		{"no key", "https://w.example", "", "not a note verifier key"},
		{"renamed key", "https://w.example", "other+" + hash + "+" + b64key, "key ID"},
		{"relative URL", "w.example/p", key, "not an absolute http(s) URL"},
		{"ftp URL", "ftp://w.example/p", key, "not an absolute http(s) URL"},
		{"URL with query", "https://w.example/p?x=1", key, "not an absolute http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPeerConfig(tc.url, tc.key)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				if p.Name != "witness.example/p" {
					t.Errorf("name %q", p.Name)
				}
			case err == nil || !errors.Is(err, ErrInvalidPeerConfig) || !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %v, want ErrInvalidPeerConfig naming %q", err, tc.want)
			}
		})
	}
	p, _ := NewPeerConfig("https://w.example", key)
	p.Name = "someone-else"
	if err := p.Validate(); !errors.Is(err, ErrInvalidPeerConfig) {
		t.Errorf("name not the key's: %v", err)
	}
	if got := p.checkpointURL("example.com/log"); got != "https://w.example"+checkpointPath("example.com/log") {
		t.Errorf("checkpoint URL %q", got)
	}
}

func TestStore_Peers(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	var keys []string
	for i := range MaxPeers + 1 {
		keys = append(keys, newPeerKey(t, fmt.Sprintf("w.example/%02d", i)).VerifierKey())
	}
	for i := range MaxPeers {
		tw.addPeer("https://w.example/", keys[i])
	}
	p, _ := NewPeerConfig("https://w.example/", keys[0])
	if err := tw.store.AddPeer(p); !errors.Is(err, ErrPeerExists) {
		t.Errorf("second add: %v", err)
	}
	p, _ = NewPeerConfig("https://w.example/", keys[MaxPeers])
	if err := tw.store.AddPeer(p); !errors.Is(err, ErrInvalidPeerConfig) {
		t.Errorf("peer %d: %v, want a refusal", MaxPeers+1, err)
	}
	peers, err := tw.store.Peers()
	if err != nil || len(peers) != MaxPeers || peers[0].Name != "w.example/00" {
		t.Fatalf("%d peers, %v", len(peers), err)
	}
	if err := tw.store.RemovePeer("w.example/00"); err != nil {
		t.Fatal(err)
	}
	if err := tw.store.RemovePeer("w.example/00"); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("second remove: %v", err)
	}
}

// TestAdmin_PeersAndEvidenceOverTheSocket: the admin socket offers the
// peer and evidence commands with the Store's errors.
func TestAdmin_PeersAndEvidenceOverTheSocket(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	sock := filepath.Join(tw.dir, AdminSocketName)
	ln, err := ListenAdmin(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: AdminHandler(tw.store)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); os.Remove(sock) })
	c := NewAdminClient(sock)

	p, err := NewPeerConfig("https://w.example/", newPeerKey(t, "w.example/p").VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddPeer(p); err != nil {
		t.Fatal(err)
	}
	if err := c.AddPeer(p); !errors.Is(err, ErrPeerExists) {
		t.Errorf("second add: %v", err)
	}
	if err := c.AddPeer(PeerConfig{Name: "x", URL: "https://w.example", Key: "x"}); !errors.Is(err, ErrInvalidPeerConfig) {
		t.Errorf("bad peer: %v", err)
	}
	if peers, err := c.Peers(); err != nil || len(peers) != 1 || peers[0] != p {
		t.Errorf("peers %+v %v", peers, err)
	}
	if err := c.RemovePeer("w.example/none"); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("remove unknown: %v", err)
	}
	if err := c.RemovePeer(p.Name); err != nil {
		t.Error(err)
	}

	if list, err := c.Evidence(); err != nil || len(list) != 0 {
		t.Errorf("evidence %+v %v", list, err)
	}
	l := newTestLog(t, "example.com/log").growTo(8)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 8))
	tw.post(requestBody(8, nil, l.fork(1).growTo(8).checkpoint(8)))
	list, err := c.Evidence()
	if err != nil || len(list) != 1 {
		t.Fatalf("evidence %+v %v", list, err)
	}
	file, err := c.EvidenceFile(list[0].ID)
	stored, _ := tw.store.EvidenceFile(list[0].ID)
	if err != nil || !bytes.Equal(file, stored) {
		t.Errorf("evidence file over the socket: %v\n%s", err, file)
	}
	if _, err := c.EvidenceFile(strings.Repeat("0", 64)); !errors.Is(err, ErrUnknownEvidence) {
		t.Errorf("unknown evidence: %v", err)
	}
}

// TestGossip_GarbagePeersNoEvidenceNoCrash: peers that fail, stall, lie or
// flood are each a failed check, logged, and never evidence; a peer whose
// own cosignature is broken is still heard, since the log's signature is
// what counts.
func TestGossip_GarbagePeersNoEvidenceNoCrash(t *testing.T) {
	l := newTestLog(t, "example.com/log").growTo(20)
	stranger := newTestLog(t, "example.com/log").growTo(20)
	otherOrigin := newTestLog(t, "example.com/other").growTo(20)
	tiles := serveTiles(t, l, 20)
	tw := startNamedWitness(t, t.TempDir(), "witness.test/honest", Options{GossipTimeout: time.Second})
	if err := tw.store.AddLog(LogConfig{Origin: l.origin, Keys: []string{l.vkey}, TileURL: tiles.url()}); err != nil {
		t.Fatal(err)
	}
	tw.mustCosign(l.request(0, 10))

	good := l.checkpoint(15)
	badSig := bytes.Clone(good)
	badSig[len(badSig)-5] ^= 'A' ^ 'B'
	random := make([]byte, 4096)
	rand.Read(random)
	text := func(b []byte) http.HandlerFunc {
		return func(rw http.ResponseWriter, r *http.Request) { rw.Write(b) }
	}
	garbage := map[string]http.HandlerFunc{
		"500":                func(rw http.ResponseWriter, r *http.Request) { http.Error(rw, "oops", 500) },
		"random bytes":       text(random),
		"html":               text([]byte("<html><body>hello</body></html>\n")),
		"empty":              text(nil),
		"other log key":      text(stranger.checkpoint(15)),
		"bad log sig":        text(badSig),
		"other origin":       text(otherOrigin.checkpoint(15)),
		"text only":          text(good[:bytes.Index(good, []byte("\n\n"))+1]),
		"oversized":          text(append(bytes.Clone(good), bytes.Repeat([]byte("— x AAAAAAAA\n"), 4096)...)),
		"non-canonical size": text([]byte(strings.Replace(string(good), "\n15\n", "\n015\n", 1))),
		"endless": func(rw http.ResponseWriter, r *http.Request) {
			chunk := bytes.Repeat([]byte("x"), 4096)
			for range 1 << 14 {
				if _, err := rw.Write(chunk); err != nil || r.Context().Err() != nil {
					return
				}
			}
		},
		"stalls": func(rw http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		},
		"redirect loop": func(rw http.ResponseWriter, r *http.Request) { http.Redirect(rw, r, r.URL.Path, http.StatusFound) },
	}
	for name, h := range garbage {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		tw.addPeer(srv.URL, newPeerKey(t, "garbage/"+strings.ReplaceAll(name, " ", "-")).VerifierKey())
	}
	// A peer whose cosignature line has its key ID and a wrong signature.
	brokenCosigner := newPeerKey(t, "garbage/broken-cosignature")
	sig := make([]byte, 4+8+64)
	v, _ := PeerConfig{Name: brokenCosigner.Name(), Key: brokenCosigner.VerifierKey()}.verifier()
	binary.BigEndian.PutUint32(sig, v.KeyHash())
	cosigned := append(bytes.Clone(good), "— "+brokenCosigner.Name()+" "+base64.StdEncoding.EncodeToString(sig)+"\n"...)
	srv := httptest.NewServer(text(cosigned))
	t.Cleanup(srv.Close)
	tw.addPeer(srv.URL, brokenCosigner.VerifierKey())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	r := tw.w.Gossip(ctx)
	if r.Failed != len(garbage) || r.Consistent != 1 || len(r.Equivocations) != 0 {
		t.Errorf("report %+v, want %d failed and 1 consistent", r, len(garbage))
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("round took %v: a stalling peer held it", elapsed)
	}
	if list, _ := tw.store.Evidence(); len(list) != 0 {
		t.Errorf("evidence from garbage: %+v", list)
	}
	if logs := tw.logs.String(); strings.Count(logs, "level=WARN msg=\"gossip: peer's checkpoint") != len(garbage) {
		t.Errorf("want one warning per garbage peer:\n%s", logs)
	}
}

// TestGossip_GarbageTilesNoEvidence: a log whose tile URL serves garbage
// gives failed checks, never evidence, whatever the tiles hold.
func TestGossip_GarbageTilesNoEvidence(t *testing.T) {
	l := newTestLog(t, "example.com/log").growTo(600)
	random := make([]byte, 8192)
	rand.Read(random)
	for name, h := range map[string]http.HandlerFunc{
		"random hashes":      func(rw http.ResponseWriter, r *http.Request) { rw.Write(random) },
		"not a tile":         func(rw http.ResponseWriter, r *http.Request) { rw.Write(random[:100]) },
		"short tiles":        func(rw http.ResponseWriter, r *http.Request) { rw.Write(random[:64]) },
		"oversized":          func(rw http.ResponseWriter, r *http.Request) { rw.Write(bytes.Repeat(random, 8)) },
		"checkpoint for all": func(rw http.ResponseWriter, r *http.Request) { rw.Write(l.checkpoint(600)) },
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			ws := startGossipGroup(t, 2, LogConfig{Origin: l.origin, Keys: []string{l.vkey}, TileURL: srv.URL}, Options{})
			ws[0].mustCosign(l.request(0, 300))
			ws[1].mustCosign(l.request(0, 555))
			for i, w := range ws {
				if r := w.gossip(); r.Failed != 1 || len(r.Equivocations) != 0 {
					t.Errorf("witness %d: %+v, want one failed check", i+1, r)
				}
				if list, _ := w.store.Evidence(); len(list) != 0 {
					t.Errorf("witness %d: evidence from garbage tiles", i+1)
				}
			}
		})
	}
}

// TestGossip_SelfAsPeerIsSkipped: a witness listed among its own peers
// does not gossip with itself.
func TestGossip_SelfAsPeerIsSkipped(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	l := newTestLog(t, "example.com/log").growTo(3)
	tw.addLog(l)
	tw.mustCosign(l.request(0, 3))
	tw.addPeer(tw.srv.URL, tw.w.Cosigner().VerifierKey())
	if r := tw.gossip(); r.Consistent+r.Failed+r.Skipped+len(r.Equivocations) != 0 {
		t.Errorf("report %+v, want nothing done", r)
	}
}

func TestLimitedTransport_CutsLongAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Write(bytes.Repeat([]byte("x"), MaxGossipAnswerSize+1))
	}))
	defer srv.Close()
	c := &http.Client{Transport: limitedTransport{base: http.DefaultTransport, max: MaxGossipAnswerSize}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if !errors.Is(err, errAnswerTooLarge) || len(b) != MaxGossipAnswerSize {
		t.Errorf("read %d bytes, %v; want %d and errAnswerTooLarge", len(b), err, MaxGossipAnswerSize)
	}
}
