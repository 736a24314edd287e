package kernel

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
)

// exportLog opens a kernel with n root actions and three created humans,
// and waits until a checkpoint covers them all.
func exportLog(t testing.TB, n int) (*Kernel, uint64) {
	t.Helper()
	ctx := context.Background()
	cfg := DefaultConfig(t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.CheckpointInterval = 100 * time.Millisecond
	cfg.DisableProduction = true
	k, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	cred, err := os.ReadFile(k.RootCredentialPath())
	if err != nil {
		t.Fatal(err)
	}
	root, err := k.Authenticate(strings.TrimSpace(string(cred)))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n+3)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if _, err := k.Submit(ctx, root, ActionRequest{Type: event.Mutate, Target: fmt.Sprintf("workspace/n%d", i)}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	for i := range 3 {
		if _, err := k.CreateAgent(ctx, root, ActorRequest{Kind: event.Human, Name: fmt.Sprintf("auditor %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	size := uint64(n + 4)
	if _, err := k.AwaitInclusionProof(ctx, size-1); err != nil {
		t.Fatal(err)
	}
	return k, size
}

func exportAndVerify(t *testing.T, k *Kernel, sel ExportSelection) ([]byte, *verifier.BundleResult) {
	t.Helper()
	var buf bytes.Buffer
	res, err := k.Export(context.Background(), sel, &buf, nil)
	if err != nil {
		t.Fatalf("Export(%+v): %v", sel, err)
	}
	if res.Bytes != int64(buf.Len()) {
		t.Fatalf("Export says %d bytes, wrote %d", res.Bytes, buf.Len())
	}
	p, err := verifier.ParsePolicy([]byte("log " + k.VerifierKey() + "\nquorum none\n"))
	if err != nil {
		t.Fatal(err)
	}
	vr, err := verifier.VerifyBundle(bytes.NewReader(buf.Bytes()), p, nil)
	if err != nil {
		t.Fatalf("bundle of %+v does not verify: %v", sel, err)
	}
	if vr.Events != res.Events {
		t.Fatalf("exported %d events, verified %d", res.Events, vr.Events)
	}
	return buf.Bytes(), vr
}

func u64(v uint64) *uint64 { return &v }

func TestExport_RangesVerify(t *testing.T) {
	k, size := exportLog(t, 600)
	for _, r := range [][2]uint64{{0, size}, {0, 1}, {5, 300}, {255, 257}, {256, 512}, {size - 1, size}, {1, size - 2}} {
		_, vr := exportAndVerify(t, k, ExportSelection{From: u64(r[0]), To: u64(r[1])})
		if vr.Proof != "range" || vr.FirstIndex != r[0] || vr.LastIndex != r[1]-1 {
			t.Fatalf("range %v: %+v", r, vr)
		}
	}
	_, vr := exportAndVerify(t, k, ExportSelection{})
	if vr.Events != vr.Size {
		t.Fatalf("the whole log: %d events of %d", vr.Events, vr.Size)
	}
}

func TestExport_SelectiveDisclosure(t *testing.T) {
	k, size := exportLog(t, 300)
	b, vr := exportAndVerify(t, k, ExportSelection{Kind: string(event.KindActorCreated)})
	if vr.Proof != "inclusion" || vr.Events != 3 || vr.ByKind["actor.created"] != 3 {
		t.Fatalf("result %+v", vr)
	}
	for i := uint64(0); i < size; i++ {
		e, err := k.Entry(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := event.Parse(e)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind != event.KindActorCreated && bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(e))) {
			t.Fatalf("the bundle carries entry %d (%s), which was not selected", i, ev.Kind)
		}
	}
	_, vr = exportAndVerify(t, k, ExportSelection{Actor: RootID, From: u64(10), To: u64(20)})
	if vr.Events != 10 {
		t.Fatalf("root's events in [10, 20): %d", vr.Events)
	}
}

func TestExport_Consistency(t *testing.T) {
	k, size := exportLog(t, 40)
	for _, old := range []uint64{1, 7, 32, size} {
		_, vr := exportAndVerify(t, k, ExportSelection{From: u64(3), To: u64(9), OldSize: old})
		if vr.OldSize != old {
			t.Fatalf("old size %d, want %d", vr.OldSize, old)
		}
	}
}

func TestExport_Refuses(t *testing.T) {
	k, size := exportLog(t, 5)
	for _, sel := range []ExportSelection{
		{From: u64(4), To: u64(4)},
		{To: u64(size + 1)},
		{OldSize: size + 1},
		{Actor: "Root"},
		{Kind: "Action"},
		{Session: "../x"},
	} {
		var buf bytes.Buffer
		if _, err := k.Export(context.Background(), sel, &buf, nil); !errors.Is(err, ErrInvalid) || buf.Len() > 0 {
			t.Errorf("Export(%+v) = %v with %d bytes written, want ErrInvalid and nothing", sel, err, buf.Len())
		}
	}
	var buf bytes.Buffer
	if _, err := k.Export(context.Background(), ExportSelection{Actor: "nobody"}, &buf, nil); !errors.Is(err, ErrNotFound) || buf.Len() > 0 {
		t.Errorf("a selection of no event: %v, %d bytes", err, buf.Len())
	}
}

// BenchmarkExport reports export throughput from a kernel's log of 20,000
// events: the whole log as a range bundle, and every action event as a
// sparse bundle (one inclusion proof each).
func BenchmarkExport(b *testing.B) {
	k, size := exportLog(b, 20_000)
	for _, c := range []struct {
		name string
		sel  ExportSelection
	}{
		{"range", ExportSelection{}},
		{"inclusion", ExportSelection{Kind: string(event.KindAction)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				res, err := k.Export(context.Background(), c.sel, io.Discard, nil)
				if err != nil {
					b.Fatal(err)
				}
				n = res.Bytes
			}
			b.SetBytes(n)
			b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
