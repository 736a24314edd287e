package witness

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/annal-dev/annal/checkpoints"
	"golang.org/x/mod/sumdb/note"
)

// FuzzOpenServedCheckpoint: a peer's monitoring answer (or a log's own
// checkpoint) is outside input. Whatever it is, the parser does not panic,
// refuses with ErrBadPeerAnswer, or accepts only a checkpoint of the
// configured origin that carries the log's valid signature, keeping the
// exact text and nothing but signatures that verify.
func FuzzOpenServedCheckpoint(f *testing.F) {
	l := newTestLog(f, "example.com/log").growTo(20)
	peer := newPeerKey(f, "witness.test/peer")
	pv, err := PeerConfig{Name: peer.Name(), Key: peer.VerifierKey()}.verifier()
	if err != nil {
		f.Fatal(err)
	}
	cfg := l.config()
	cp := l.checkpoint(12)
	text := string(cp[:bytes.Index(cp, []byte("\n\n"))+1])
	// What a peer's monitoring endpoint serves: the log's signature and
	// the peer's cosignature.
	cosigned, err := note.Sign(&note.Note{Text: text, Sigs: mustOpen(f, cp, l).Sigs}, peer.Signer())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{
		cp,
		cosigned,
		l.checkpoint(0),
		[]byte(strings.Replace(string(cosigned), "— witness.test/peer ", "— witness.test/peer A", 1)),
		append(bytes.Clone(cp), "— other AAAAAAAAAAAA\n"...),
		[]byte(text),
		[]byte(text + "\n"),
		[]byte(strings.Replace(string(cp), "example.com/log", "example.com/other", 1)),
		[]byte(strings.Replace(string(cp), "\n12\n", "\n13\n", 1)),
		[]byte("<html>not found</html>\n"),
		[]byte("example.com/log\n1\nAAAA\n\n— k AAAAAAA=\n"),
		{},
	} {
		f.Add(seed)
	}
	logKey := mustVerifierTB(f, l.vkey)
	f.Fuzz(func(t *testing.T, answer []byte) {
		s, err := openServedCheckpoint(answer, cfg, pv)
		if err != nil {
			if !errors.Is(err, ErrBadPeerAnswer) {
				t.Fatalf("error %v does not wrap ErrBadPeerAnswer", err)
			}
			return
		}
		if len(answer) > MaxGossipAnswerSize || len(s.note) > len(answer) {
			t.Fatalf("accepted %d bytes, kept %d", len(answer), len(s.note))
		}
		opened, err := checkpoints.OpenCheckpoint(s.note, logKey)
		if err != nil {
			t.Fatalf("kept note does not verify with the log key: %v\n%q", err, s.note)
		}
		if opened.Checkpoint.Origin != cfg.Origin || opened.Size != s.cp.Size || opened.Hash != s.cp.Hash {
			t.Fatalf("kept %+v, parsed %+v", opened.Checkpoint, s.cp)
		}
		if !bytes.HasPrefix(answer, []byte(opened.Note.Text)) {
			t.Fatalf("kept text %q is not the answer's", opened.Note.Text)
		}
		all, err := note.Open(s.note, withCosigner{note.VerifierList(logKey), pv})
		if err != nil || len(all.UnverifiedSigs) != 0 {
			t.Fatalf("kept note holds a signature that does not verify: %v %v", err, all)
		}
	})
}

func mustOpen(t testing.TB, signed []byte, l *testLog) *note.Note {
	t.Helper()
	n, err := note.Open(signed, note.VerifierList(mustVerifierTB(t, l.vkey)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
