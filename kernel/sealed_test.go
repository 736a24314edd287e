package kernel

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// openSealedKernel opens a kernel on dir, quiet and without production,
// and returns it with its root.
func openSealedKernel(t *testing.T, dir string) (*Kernel, *Actor, Config) {
	t.Helper()
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
	return k, root, cfg
}

// TestErasureFinishedAfterCrash: an erasure whose event is durable but
// whose key survived (a crash in between) is finished at the next start.
func TestErasureFinishedAfterCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k, root, cfg := openSealedKernel(t, dir)
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
	// annald rebuild folds the log again, the erasure and the commitment
	// it left included.
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Rebuild(ctx, cfg)
	if err != nil {
		t.Fatalf("rebuild after erasure: %v", err)
	}
	if rep.Size != rc.Index+2 || len(rep.Differences) != 0 {
		t.Fatalf("rebuild: %+v", rep)
	}
}

// TestRefusedSealKeepsSharedPayload: a refused request that seals the very
// payload, under the same salt, of a committed one does not remove the
// committed one's file; a refused request's own file goes.
func TestRefusedSealKeepsSharedPayload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k, root, _ := openSealedKernel(t, dir)
	defer k.Close()
	salt := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	req := ActionRequest{Type: event.Create, Target: "crm/1", Payload: json.RawMessage(`{"x":1}`), Subject: "customer-1", Salt: salt}
	rc, err := k.Submit(ctx, root, req)
	if err != nil {
		t.Fatal(err)
	}
	refused := req
	refused.ActionID = "not-registered"
	if _, err := k.Submit(ctx, root, refused); err == nil {
		t.Fatal("an unregistered action id was accepted")
	}
	entry, err := k.Entry(ctx, rc.Index)
	if err != nil {
		t.Fatal(err)
	}
	if _, payload, err := k.OpenSealed(SealedOf(entry)); err != nil || string(payload) != `{"x":1}` {
		t.Fatalf("the committed payload after a refused twin: %s, %v", payload, err)
	}
	other := refused
	other.Payload, other.Salt = json.RawMessage(`{"x":2}`), ""
	if _, err := k.Submit(ctx, root, other); err == nil {
		t.Fatal("an unregistered action id was accepted")
	}
	if files, _ := os.ReadDir(filepath.Join(dir, "sealed", "payloads", "customer-1")); len(files) != 1 {
		t.Fatalf("payload files %v, want only the committed one", files)
	}
}

// TestAttack_SealRacingErasure: actions sealing payloads under a subject
// race its erasure. Each seal is committed or refused (a 409: the subject is
// erased), never a 503 of a file renamed into a folder the erasure removed;
// the erasure itself never fails on a folder a seal wrote into; and after it
// no key and no payload of the subject is left, nor does the next start find
// one to destroy.
func TestAttack_SealRacingErasure(t *testing.T) {
	ctx := context.Background()
	for round := range 10 {
		dir := t.TempDir()
		k, root, cfg := openSealedKernel(t, dir)
		subject := fmt.Sprint("customer-", round)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 10 {
					_, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: fmt.Sprintf("crm/%d/%d", w, i), Payload: json.RawMessage(`{"x":1}`), Subject: subject})
					if err != nil && !errors.Is(err, ErrConflict) {
						t.Errorf("a seal racing the erasure: %v", err)
					}
				}
			}()
		}
		if _, err := k.EraseSubject(ctx, root, subject, EraseRequest{Reason: "race"}); err != nil {
			t.Errorf("the erasure racing seals: %v", err)
		}
		wg.Wait()
		for _, p := range []string{filepath.Join(dir, "sealed", "keys", subject), filepath.Join(dir, "sealed", "payloads", subject)} {
			if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("round %d: %s is left after the erasure (%v)", round, p, err)
			}
		}
		k.Close()
		if k, err := Open(cfg); err != nil {
			t.Fatal(err)
		} else {
			k.Close()
		}
	}
}
