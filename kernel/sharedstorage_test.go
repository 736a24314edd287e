package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/sealstore"
)

func openAWS(t *testing.T, dir string, a servicestest.AWS) (*Kernel, *Actor) {
	t.Helper()
	k, err := Open(awsConfig(t, dir, a))
	if err != nil {
		t.Fatal(err)
	}
	return k, rootOf(t, k)
}

func closeKernel(t *testing.T, k *Kernel) {
	t.Helper()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
}

// sealedAt returns the sealed payload the entry at index commits to.
func sealedAt(t *testing.T, k *Kernel, index uint64) *event.SealedPayload {
	t.Helper()
	entry, err := k.Entry(context.Background(), index)
	if err != nil {
		t.Fatal(err)
	}
	sp := SealedOf(entry)
	if sp == nil {
		t.Fatalf("entry %d seals nothing", index)
	}
	return sp
}

// Two kernels of one log on shared storage, each on its own data folder
// holding only the copied identity (seed 002: any kernel instance handles
// any request): the second opens what the first sealed and erases a
// subject; the first, reopened, cannot open that subject's payload any
// more, nor seal under it, and still opens the other subject's. The key's
// row is left with no key, so no instance makes a new one.
func TestSpec002_StatelessKernel_ErasureOnOneInstanceHoldsOnAll(t *testing.T) {
	a := servicestest.NewAWS(t)
	ctx := context.Background()
	dirA := t.TempDir()
	ka, root := openAWS(t, dirA, a)
	rc1, err := ka.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "crm/1", Payload: json.RawMessage(`{"n":1}`), Subject: "customer-1"})
	if err != nil {
		t.Fatal(err)
	}
	rc2, err := ka.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "crm/2", Payload: json.RawMessage(`{"n":2}`), Subject: "customer-2"})
	if err != nil {
		t.Fatal(err)
	}
	closeKernel(t, ka)

	kb, rootB := openAWS(t, copyKeys(t, dirA), a)
	sp1 := sealedAt(t, kb, rc1.Index)
	if _, payload, err := kb.OpenSealed(sp1); err != nil || string(payload) != `{"n":1}` {
		t.Fatalf("the second instance opens the first's sealed payload: %s %v", payload, err)
	}
	if _, err := kb.EraseSubject(ctx, rootB, "customer-1", EraseRequest{}); err != nil {
		t.Fatal(err)
	}
	closeKernel(t, kb)

	ka, root = openAWS(t, dirA, a)
	defer closeKernel(t, ka)
	if _, _, err := ka.OpenSealed(sealedAt(t, ka, rc1.Index)); !errors.Is(err, ErrErased) {
		t.Fatalf("the first instance opens a payload erased on the second: %v", err)
	}
	if _, payload, err := ka.OpenSealed(sealedAt(t, ka, rc2.Index)); err != nil || string(payload) != `{"n":2}` {
		t.Fatalf("another subject's payload: %s %v", payload, err)
	}
	if _, err := ka.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "crm/1b", Payload: json.RawMessage(`{}`), Subject: "customer-1"}); err == nil {
		t.Fatal("sealed under a subject erased on another instance")
	}
	var wrapped []byte
	if err := ka.shared.DB.QueryRow("SELECT wrapped FROM annal_sealed_keys WHERE subject = ?", "customer-1").Scan(&wrapped); err != nil || wrapped != nil {
		t.Fatalf("the erased subject's key row: %x %v", wrapped, err)
	}
}

// A kernel that already kept sealed payloads in its data folder (an
// instance on shared storage from before they were shared) moves them on
// start: sealed again under the shared store's key, its own key destroyed,
// the folder's sealed/ removed; another instance then opens them. A
// subject erased on the shared storage is erased in the folder too, not
// brought back.
func TestSealedPayloadsMovedFromTheDataFolderToSharedStorage(t *testing.T) {
	a := servicestest.NewAWS(t)
	ctx := context.Background()
	dir := t.TempDir()
	k, root := openAWS(t, dir, a)
	rcDave, err := k.Submit(ctx, root, ActionRequest{Type: event.Create, Target: "crm/dave", Payload: json.RawMessage(`{"d":1}`), Subject: "dave"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.EraseSubject(ctx, root, "dave", EraseRequest{}); err != nil {
		t.Fatal(err)
	}
	spDave := sealedAt(t, k, rcDave.Index)
	closeKernel(t, k)

	// What an older annald left in the folder.
	local := sealstore.Open(dir)
	salt, _ := sealstore.NewSalt()
	sp, fresh, err := local.Seal("carol", salt, []byte(`{"c":1}`))
	if err != nil {
		t.Fatal(err)
	}
	local.Release(sp, fresh, true)
	daveSalt, _ := sealstore.NewSalt()
	if _, _, err := local.Seal("dave", daveSalt, []byte(`{"d":2}`)); err != nil {
		t.Fatal(err)
	}

	k, _ = openAWS(t, dir, a)
	if _, err := os.Stat(filepath.Join(dir, "sealed")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the folder's sealed payloads stayed: %v", err)
	}
	if _, payload, err := k.OpenSealed(sp); err != nil || string(payload) != `{"c":1}` {
		t.Fatalf("a moved payload: %s %v", payload, err)
	}
	if _, _, err := k.OpenSealed(spDave); !errors.Is(err, ErrErased) {
		t.Fatalf("a subject erased on shared storage came back from the folder: %v", err)
	}
	closeKernel(t, k)
	other, _ := openAWS(t, copyKeys(t, dir), a)
	defer closeKernel(t, other)
	if _, payload, err := other.OpenSealed(sp); err != nil || string(payload) != `{"c":1}` {
		t.Fatalf("another instance opens a moved payload: %s %v", payload, err)
	}
}
