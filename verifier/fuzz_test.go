package verifier

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/rfc6962"
)

// FuzzVerifyProof feeds arbitrary entries and proofs to the verifier under a
// fixed log. It must never panic, every failure must be a *Error, and a
// success must mean what it says.
func FuzzVerifyProof(f *testing.F) {
	l := newTestLog(f, testOrigin, 6)
	for i := range uint64(6) {
		f.Add(l.entries[i], l.proof(i, 6))
	}
	f.Add(l.entries[0], []byte("c2sp.org/tlog-proof@v1\nindex 0\n\n"))
	f.Add([]byte("{}"), []byte("c2sp.org/tlog-proof@v1\nextra AA==\nindex 99\nAAAA\n\nx"))
	f.Fuzz(func(t *testing.T, entry, proofText []byte) {
		res, err := VerifyProof(entry, proofText, l.vkey)
		if err != nil {
			var verr *Error
			if !errors.As(err, &verr) {
				t.Fatalf("error %v is not a *verifier.Error", err)
			}
			return
		}
		if res.Index >= res.Size || res.Origin != testOrigin {
			t.Fatalf("accepted index %d of size %d, origin %q", res.Index, res.Size, res.Origin)
		}
		if want := rfc6962.DefaultHasher.HashLeaf(entry); !bytes.Equal(res.LeafHash[:], want) {
			t.Fatalf("reported leaf hash %x, entry hashes to %x", res.LeafHash, want)
		}
		if !bytes.Equal(res.LeafHash[:], l.tree.LeafHash(res.Index)) {
			t.Fatalf("accepted an entry that is not at index %d", res.Index)
		}
	})
}

// FuzzParseEvent: whatever ParseEvent accepts is canonical JSON.
func FuzzParseEvent(f *testing.F) {
	f.Add(actionEntry(0))
	f.Add([]byte(`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"log.genesis","time":"2026-11-22T10:00:01Z","v":1}`))
	f.Add([]byte(`{"v":1e0}`))
	f.Add([]byte("{\"a\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, entry []byte) {
		ev, err := ParseEvent(entry)
		if err != nil {
			return
		}
		canonical, err := jcs.Transform(entry)
		if err != nil || !bytes.Equal(canonical, entry) {
			t.Fatalf("accepted a non-canonical entry %q", entry)
		}
		if ev.ID == "" || ev.Kind == "" || ev.Actor == "" {
			t.Fatalf("accepted an event without id, kind or actor: %+v", ev)
		}
	})
}
