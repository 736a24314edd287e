package witness

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"
	"k8s.io/klog/v2"
)

// TestInterop_TesseraWitnessClient runs a Tessera POSIX log whose appender
// is built with WithWitnesses and a c2sp.org/tlog-policy naming this
// witness, so Tessera's own witness client (internal/witness, reached
// through the public API) asks for every checkpoint to be cosigned before
// it is published. Tessera compares the 409 Content-Type byte for byte; the
// test makes the witness forget the log mid-way so that path is taken.
func TestInterop_TesseraWitnessClient(t *testing.T) {
	if !testing.Verbose() {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	tw := startWitness(t, t.TempDir(), Options{})
	const origin = "example.com/tessera-interop"
	skey, vkey, err := checkpoints.GenerateLogKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	logSigner, err := checkpoints.NewLogSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.store.AddLog(LogConfig{Origin: origin, Keys: []string{vkey}}); err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf("witness w1 %s %s\nquorum w1\n", tw.w.Cosigner().VerifierKey(), tw.srv.URL)
	group, err := tessera.NewWitnessGroupFromPolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	driver, err := posix.New(ctx, posix.Config{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(logSigner).
		WithBatching(1, 5*time.Millisecond).
		WithCheckpointInterval(100*time.Millisecond).
		WithWitnesses(group, &tessera.WitnessOptions{Timeout: 10 * time.Second})
	appender, shutdown, reader, err := tessera.NewAppender(ctx, driver, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := shutdown(ctx); err != nil {
			t.Errorf("tessera shutdown: %v", err)
		}
	}()
	awaiter := tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, 10*time.Millisecond)

	logVerifier, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	witnessVerifier := mustCosignatureVerifier(t, tw.w.Cosigner().VerifierKey())
	var lastSize uint64
	for round := range 3 {
		if round == 2 {
			// The witness forgets the log: Tessera's next request has the old
			// size of its published checkpoint, gets 409 "0\n" with
			// text/x.tlog.size, and must retry from 0.
			if err := tw.store.RemoveLog(origin, true); err != nil {
				t.Fatal(err)
			}
			if err := tw.store.AddLog(LogConfig{Origin: origin, Keys: []string{vkey}}); err != nil {
				t.Fatal(err)
			}
		}
		var future tessera.IndexFuture
		for i := range 5 {
			future = appender.Add(ctx, tessera.NewEntry(fmt.Appendf(nil, "round %d entry %d", round, i)))
		}
		idx, published, err := awaiter.Await(ctx, future)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		n, err := note.Open(published, note.VerifierList(logVerifier, witnessVerifier))
		if err != nil {
			t.Fatalf("round %d: published checkpoint does not verify: %v\n%s", round, err, published)
		}
		if len(n.Sigs) != 2 {
			t.Fatalf("round %d: published checkpoint has %d trusted signatures, want the log's and the witness's:\n%s", round, len(n.Sigs), published)
		}
		cp, err := ParseSignedCheckpoint(published)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Size <= idx.Index || cp.Size <= lastSize {
			t.Fatalf("round %d: published size %d does not cover index %d or grow from %d", round, cp.Size, idx.Index, lastSize)
		}
		lastSize = cp.Size
		if stored := tw.storedSize(origin); stored < int64(cp.Size) {
			t.Errorf("round %d: witness stored size %d, behind the published %d", round, stored, cp.Size)
		}
	}
	if logs := tw.logs.String(); !strings.Contains(logs, "is not the size of the latest checkpoint cosigned") {
		t.Errorf("the forgotten log did not make Tessera take the 409 path; witness log:\n%s", logs)
	}
}

func mustCosignatureVerifier(t *testing.T, vkey string) note.Verifier {
	t.Helper()
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
