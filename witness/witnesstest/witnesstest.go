// Package witnesstest runs an annal-witness in process, for the tests of
// packages that talk to witnesses: package witness's Witness behind
// httptest on 127.0.0.1, its state in a test folder, stopped when the test
// ends.
package witnesstest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/witness"
)

// Witness is a running in-process witness.
type Witness struct {
	Server *httptest.Server
	Store  *witness.Store
	// VerifierKey is its cosignature/v1 verifier key, as a policy names it.
	VerifierKey string
}

// Start starts a witness with a new key named name; wrap, if not nil,
// wraps its HTTP handler (to count or break requests). Add the logs it
// witnesses to its Store.
func Start(t testing.TB, name string, wrap func(http.Handler) http.Handler) *Witness {
	t.Helper()
	store, err := witness.OpenStore(filepath.Join(t.TempDir(), witness.StateFileName), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	cosigner, err := witness.NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	w, err := witness.New(store, cosigner, witness.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	h := w.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Witness{Server: srv, Store: store, VerifierKey: cosigner.VerifierKey()}
}

// OfferFork signs, with a log's own signing key (the note signer key of
// its log.key), a checkpoint of origin at size but another root, and
// offers it to the witness as the successor of size: what a log showing
// two histories does. A witness that cosigned size refuses it and keeps
// the two as evidence; OfferFork fails the test if it is cosigned.
func (w *Witness) OfferFork(t testing.TB, logSigningKey, origin string, size uint64) {
	t.Helper()
	signer, err := note.NewSigner(strings.TrimSpace(logSigningKey))
	if err != nil {
		t.Fatal(err)
	}
	other := sha256.Sum256([]byte("another history"))
	body := checkpoints.Checkpoint{Origin: origin, Size: size, Hash: other}.Marshal()
	forged, err := note.Sign(&note.Note{Text: string(body)}, signer)
	if err != nil {
		t.Fatal(err)
	}
	req := fmt.Sprintf("old %d\n\n%s", size, forged)
	resp, err := http.Post(w.Server.URL+"/add-checkpoint", "text/plain", bytes.NewBufferString(req))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("the witness cosigned a second tree of the same size")
	}
}
