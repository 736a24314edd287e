package server

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/format/oid"

	"github.com/annal-dev/annal/blobstore"
	"github.com/annal-dev/annal/client"
)

// TestBlobs: an agent stores the bytes behind an OID; a human reads them,
// checked against the OID; an agent may not read them; a blob damaged on
// disk is never served; without --keep-blobs the store answers 404.
func TestBlobs(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	_, agentCred := ts.newAgent(t, agentSpec{name: "runner", energy: 10})
	agent, _ := client.New(ts.srv.URL, agentCred)

	if _, err := agent.PutBlob(ctx, []byte("x")); !client.IsStatus(err, http.StatusNotFound) || !strings.Contains(err.Error(), "--keep-blobs") {
		t.Errorf("without a store: %v", err)
	}
	dir := t.TempDir()
	store, err := blobstore.Open(dir, 1<<10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(ts.k, discardLogger())
	srv.KeepBlobs(store)
	ts.srv.Config.Handler = srv

	stdout := []byte("total 0\n-rw-r--r-- 1 agent agent 0 notes.md\n")
	id, err := agent.PutBlob(ctx, stdout)
	if err != nil || id != oid.Of(stdout) {
		t.Fatalf("agent puts: %s %v", id, err)
	}
	got, err := ts.root.Blob(ctx, id)
	if err != nil || !bytes.Equal(got, stdout) {
		t.Fatalf("root gets: %q %v", got, err)
	}
	if _, err := agent.Blob(ctx, id); !client.IsStatus(err, http.StatusForbidden) {
		t.Errorf("an agent reads a blob: %v", err)
	}
	r := ts.call(t, "GET", "/v1/blobs/"+id, ts.rootCred, nil)
	if r.header.Get("Content-Type") != "application/octet-stream" || r.header.Get("Content-Disposition") != "attachment" {
		t.Errorf("blob headers: %v", r.header)
	}
	if _, err := agent.PutBlob(ctx, make([]byte, 2<<10)); !client.IsStatus(err, http.StatusRequestEntityTooLarge) {
		t.Errorf("a blob over --max-blob: %v", err)
	}
	if r := ts.call(t, "GET", "/v1/blobs/sha256:nothex", ts.rootCred, nil); r.status != http.StatusBadRequest {
		t.Errorf("a malformed OID: %v", r)
	}
	// Damage it on disk: the server refuses to serve it.
	h := strings.TrimPrefix(id, "sha256:")
	path := filepath.Join(dir, "sha256", h[:2], h[2:])
	os.WriteFile(path, append([]byte("tampered "), stdout...), 0o600)
	if r := ts.call(t, "GET", "/v1/blobs/"+id, ts.rootCred, nil); r.status != http.StatusInternalServerError || bytes.Contains(r.body, []byte("tampered")) {
		t.Errorf("a damaged blob: %v", r)
	}
}
