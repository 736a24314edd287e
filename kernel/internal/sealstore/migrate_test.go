package sealstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/internal/sharedstore"
)

// A payload in the data folder that does not open under its subject's key
// stops the move, naming its file, and the folder keeps the subject's key
// and payloads; once the file is set right the move finishes. Moving into
// the data folder's own store is refused.
func TestMoveFromStopsAtADamagedPayload(t *testing.T) {
	a := servicestest.NewAWS(t)
	dir := t.TempDir()
	shared, err := sharedstore.Open(context.Background(), sharedstore.Config{DataDir: dir, DSN: a.DSN, S3: a.S3(), Bucket: a.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	local := Open(dir)
	if _, err := local.MoveFrom(dir); err == nil {
		t.Fatal("moved a data folder's payloads into itself")
	}
	salt, _ := NewSalt()
	sp, fresh, err := local.Seal("erin", salt, []byte(`{"e":1}`))
	if err != nil {
		t.Fatal(err)
	}
	local.Release(sp, fresh, true)
	path := filepath.Join(dir, "sealed", "payloads", "erin", strings.TrimPrefix(sp.Commitment, "sha256:"))
	good, _ := os.ReadFile(path)
	bad := append([]byte{}, good...)
	bad[len(bad)-1] ^= 1
	os.WriteFile(path, bad, 0o600)

	store := OpenShared(shared)
	if _, err := store.MoveFrom(dir); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a damaged payload: %v", err)
	}
	if !local.Holds("erin") {
		t.Fatal("the folder's key was destroyed though its payload was not moved")
	}
	os.WriteFile(path, good, 0o600)
	if n, err := store.MoveFrom(dir); err != nil || n != 1 {
		t.Fatalf("the move, again: %d %v", n, err)
	}
	if _, payload, err := store.Open(sp); err != nil || string(payload) != `{"e":1}` {
		t.Fatalf("the moved payload: %s %v", payload, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sealed")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sealed/ after the move: %v", err)
	}
}
