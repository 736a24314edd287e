package witness

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// fuzzSeeds are request bodies from a real log: valid ones and near misses.
func fuzzSeeds(t testing.TB, l *testLog) [][]byte {
	l.growTo(20)
	cp := string(l.checkpoint(12))
	return [][]byte{
		l.request(0, 0),
		l.request(0, 5),
		l.request(5, 12),
		l.request(12, 12),
		l.request(12, 20),
		[]byte("old 5\n\n" + cp),
		[]byte("old 0\n" + cp),
		[]byte("old 01\n\n" + cp),
		[]byte("old 0\n\n" + strings.Replace(cp, "\n12\n", "\n012\n", 1)),
		[]byte("old 0\n\n" + cp + cp[strings.Index(cp, "\n\n")+2:]),
		[]byte("old 0\n\n" + strings.Replace(cp, "— ", "-- ", 1)),
		[]byte("old 0\n\nexample.com/log\n1\nAAAA\n\n— k AAAAAAA=\n"),
		[]byte("old 0\n\n"),
		[]byte(""),
	}
}

// FuzzParseAddCheckpointRequest: the parser never panics, stays within its
// limits, and what it accepts is canonical: Marshal gives back the exact
// bytes, so one request has one spelling.
func FuzzParseAddCheckpointRequest(f *testing.F) {
	for _, s := range fuzzSeeds(f, newTestLog(f, "example.com/log")) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseAddCheckpointRequest(body)
		if err != nil {
			if !errors.Is(err, ErrMalformedRequest) && !errors.Is(err, ErrRequestTooLarge) {
				t.Fatalf("error %v wraps neither ErrMalformedRequest nor ErrRequestTooLarge", err)
			}
			return
		}
		if len(r.Proof) > MaxProofLines {
			t.Fatalf("%d proof lines accepted", len(r.Proof))
		}
		if got := r.Marshal(); !bytes.Equal(got, body) {
			t.Fatalf("accepted body does not round-trip:\n%q\n%q", body, got)
		}
		text := r.SignedCheckpoint[:bytes.LastIndex(r.SignedCheckpoint, []byte("\n\n"))+1]
		if !bytes.Equal(r.Checkpoint.Marshal(), text) {
			t.Fatalf("parsed checkpoint %+v does not marshal to its text %q", r.Checkpoint, text)
		}
	})
}

// FuzzAddCheckpoint drives a whole witness with arbitrary bodies from the
// seeds of a real, configured log: every answer is a cosignature or one of
// the protocol's refusals, never an internal error, and a cosignature is
// given only for a checkpoint whose log signature verifies.
func FuzzAddCheckpoint(f *testing.F) {
	l := newTestLog(f, "example.com/log")
	for _, s := range fuzzSeeds(f, l) {
		f.Add(s)
	}
	tw := startWitness(f, f.TempDir(), Options{Logger: discardLogger()})
	tw.addLog(l)
	logKey := note.VerifierList(mustVerifierTB(f, l.vkey))
	f.Fuzz(func(t *testing.T, body []byte) {
		sig, err := tw.w.AddCheckpoint(context.Background(), body)
		var conflict *ConflictError
		switch {
		case err == nil:
			r, perr := ParseAddCheckpointRequest(body)
			if perr != nil {
				t.Fatalf("cosigned an unparsable request: %v", perr)
			}
			if _, verr := note.Open(r.SignedCheckpoint, logKey); verr != nil {
				t.Fatalf("cosigned a checkpoint the log did not sign: %v", verr)
			}
			if !bytes.HasPrefix(sig, []byte("— "+testWitnessName+" ")) {
				t.Fatalf("cosignature %q", sig)
			}
		case errors.As(err, &conflict),
			errors.Is(err, ErrMalformedRequest),
			errors.Is(err, ErrRequestTooLarge),
			errors.Is(err, ErrUnknownLog),
			errors.Is(err, ErrUntrustedCheckpoint),
			errors.Is(err, ErrInconsistent):
		default:
			t.Fatalf("unexpected error class: %v", err)
		}
	})
}
