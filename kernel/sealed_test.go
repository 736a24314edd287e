package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// TestErasureFinishedAfterCrash: an erasure whose event is durable but
// whose key survived (a crash in between) is finished at the next start.
func TestErasureFinishedAfterCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := DefaultConfig(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.DisableProduction = true
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root, err := k.Actor("root")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "crm/1", Payload: json.RawMessage(`{"x":1}`), Subject: "customer-1"})
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "sealed", "keys", "customer-1")
	saved, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.EraseSubject(ctx, root, "customer-1", EraseRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	// As if the process died after the event and before the destruction.
	if err := os.WriteFile(keyPath, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := os.Stat(keyPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the key of an erased subject survived a restart: %v", err)
	}
	entry, err := k.Entry(ctx, rc.Index)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.OpenSealed(SealedOf(entry)); !errors.Is(err, ErrErased) {
		t.Fatalf("open after restart: %v", err)
	}
}
