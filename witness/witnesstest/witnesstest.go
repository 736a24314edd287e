// Package witnesstest runs an annal-witness in process, for the tests of
// packages that talk to witnesses: package witness's Witness behind
// httptest on 127.0.0.1, its state in a test folder, stopped when the test
// ends.
package witnesstest

import (
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

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
