package logstore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/transparency-dev/tessera"
	"golang.org/x/mod/sumdb/note"
)

// scriptedCheckpoints is a LogReader whose ReadCheckpoint answers from a
// script, one answer per read, the last one forever.
type scriptedCheckpoints struct {
	tessera.LogReader
	mu     sync.Mutex
	script [][]byte
	reads  int
}

func (s *scriptedCheckpoints) ReadCheckpoint(context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	next := s.script[0]
	if len(s.script) > 1 {
		s.script = s.script[1:]
	}
	return next, nil
}

func (s *scriptedCheckpoints) then(answers ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = answers
}

// TestLatestCheckpoint_UnverifiableRead: a published checkpoint that does
// not verify (here signed by another key of the same name, which is what
// "checkpoint has no signature by log key" reports) is read again once; if
// it still does not verify, the last verified checkpoint is served for at
// most checkpointGrace, and then the verification error is returned until a
// verifiable checkpoint is published.
func TestLatestCheckpoint_UnverifiableRead(t *testing.T) {
	signer, impostor, verifier, sign := testCheckpointKeys(t)
	good9, good11, bad12 := sign(9, signer), sign(11, signer), sign(12, impostor)
	// A read that mixes two versions of the file whose lengths differ (the
	// size grew from 9 to 10, one digit more) can report exactly what the
	// tester saw: the signature line, shifted by a byte, decodes to another
	// key hash.
	var torn []byte
	for k, old, next := 0, good9, sign(10, signer); k < len(old) && torn == nil; k++ {
		mix := append(append([]byte{}, old[:k]...), next[k:]...)
		if _, err := checkpoints.OpenCheckpoint(mix, verifier); err != nil && strings.Contains(err.Error(), "no signature by log key") {
			torn = mix
		}
	}
	if torn == nil {
		t.Fatal("no mixed read says \"no signature by log key\"")
	}

	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	reader := &scriptedCheckpoints{script: [][]byte{good9}}
	l := &Log{Reader: reader, Verifier: verifier, cp: verifiedCheckpoint{
		now: func() time.Time { return now }, logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}}
	ctx := context.Background()
	want := func(size uint64, errText string) {
		t.Helper()
		cp, err := l.LatestCheckpoint(ctx)
		switch {
		case errText != "":
			if err == nil || !strings.Contains(err.Error(), errText) {
				t.Fatalf("latestCheckpoint = %v, %v; want an error saying %q", cp, err, errText)
			}
		case err != nil || cp.Size != size:
			t.Fatalf("latestCheckpoint = %v, %v; want the checkpoint of size %d", cp, err, size)
		}
	}

	want(9, "")
	// One torn read, then the file verifies: the second read is served.
	reader.then(torn, good11)
	want(11, "")
	if logs.Len() != 0 {
		t.Fatalf("a read that verified on the second try was logged: %s", logs.String())
	}
	// A checkpoint that does not verify: the last verified one is served,
	// with one error logged.
	reader.then(torn, bad12)
	want(11, "")
	now = now.Add(checkpointGrace)
	want(11, "")
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "no signature by log key") {
		t.Fatalf("logged %d errors: %s", n, logs.String())
	}
	// Past the grace period, reads fail and say why.
	now = now.Add(time.Millisecond)
	want(0, "has not verified for 5.001s: checkpoint has no signature by log key")
	want(0, "checkpoint has no signature by log key")
	// A verifiable checkpoint ends it.
	reader.then(sign(13, signer))
	want(13, "")
	reader.then(bad12)
	want(13, "")
	if !strings.Contains(logs.String(), "verifies again") {
		t.Fatalf("recovery not logged: %s", logs.String())
	}
}

// TestLatestCheckpoint_NoVerifiedCheckpointYet: with nothing verified
// before, an unverifiable checkpoint is an error at once.
func TestLatestCheckpoint_NoVerifiedCheckpointYet(t *testing.T) {
	_, vkey, _ := checkpoints.GenerateLogKey("example.com/annal/tlog-test")
	verifier, _ := checkpoints.NewLogVerifier(vkey)
	reader := &scriptedCheckpoints{script: [][]byte{[]byte("example.com/annal/tlog-test\n1\n\n")}}
	l := &Log{Reader: reader, Verifier: verifier, cp: verifiedCheckpoint{now: time.Now, logger: slog.New(slog.DiscardHandler)}}
	if cp, err := l.LatestCheckpoint(context.Background()); err == nil {
		t.Fatalf("latestCheckpoint = %v", cp)
	}
	if reader.reads != 2 {
		t.Fatalf("read the checkpoint %d times, want 2", reader.reads)
	}
}

// TestProofCheckpoint_ReusesARecentReadThatCoversTheEntry: a proof reuses
// the checkpoint read less than checkpointReuse ago when it covers the
// entry, reads afresh for an entry it does not cover and once the reuse
// has expired, and never reuses while reads fail to verify.
func TestProofCheckpoint_ReusesARecentReadThatCoversTheEntry(t *testing.T) {
	signer, impostor, verifier, sign := testCheckpointKeys(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	reader := &scriptedCheckpoints{script: [][]byte{sign(10, signer)}}
	l := &Log{Reader: reader, Verifier: verifier, cp: verifiedCheckpoint{
		now: func() time.Time { return now }, logger: slog.New(slog.DiscardHandler),
	}}
	ctx := context.Background()
	proofCheckpoint := func(index, wantSize uint64, wantReads int) {
		t.Helper()
		cp, err := l.ProofCheckpoint(ctx, index)
		if err != nil || cp.Size != wantSize || reader.reads != wantReads {
			t.Fatalf("ProofCheckpoint(%d) = %v, %v after %d reads; want size %d after %d reads", index, cp, err, reader.reads, wantSize, wantReads)
		}
	}

	proofCheckpoint(3, 10, 1)
	reader.then(sign(20, signer))
	now = now.Add(checkpointReuse - time.Microsecond)
	proofCheckpoint(9, 10, 1)  // covered and recent: reused
	proofCheckpoint(15, 20, 2) // not covered: read afresh
	now = now.Add(checkpointReuse)
	reader.then(sign(30, signer))
	proofCheckpoint(1, 30, 3) // expired: read afresh

	// While the published checkpoint does not verify, nothing is reused:
	// every proof reads the file, so the first verifiable one ends it.
	reader.then(sign(31, impostor))
	now = now.Add(checkpointReuse)
	proofCheckpoint(1, 30, 5) // two reads failed; the last verified one served
	proofCheckpoint(1, 30, 7)
	reader.then(sign(32, signer))
	proofCheckpoint(1, 32, 8)
}

// testCheckpointKeys makes a log's signer and verifier, an impostor's
// signer under the same origin, and sign, which signs a checkpoint of a
// size with a signer.
func testCheckpointKeys(t *testing.T) (signer, impostor note.Signer, verifier note.Verifier, sign func(uint64, note.Signer) []byte) {
	t.Helper()
	const origin = "example.com/annal/tlog-test"
	skey, vkey, err := checkpoints.GenerateLogKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	otherSkey, _, err := checkpoints.GenerateLogKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ = checkpoints.NewLogSigner(skey)
	impostor, _ = checkpoints.NewLogSigner(otherSkey)
	verifier, _ = checkpoints.NewLogVerifier(vkey)
	sign = func(size uint64, s note.Signer) []byte {
		raw, err := checkpoints.SignCheckpoint(checkpoints.Checkpoint{Origin: origin, Size: size}, s)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	return signer, impostor, verifier, sign
}
