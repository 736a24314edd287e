package verifier

import (
	"bytes"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

func mustVerifier(t *testing.T, vkey string) note.Verifier {
	t.Helper()
	v, err := LogVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// signAgain appends a signature by s to an already signed note.
func signAgain(text string, signed []byte, s note.Signer) ([]byte, error) {
	extra, err := note.Sign(&note.Note{Text: text}, s)
	if err != nil {
		return nil, err
	}
	sigLine := extra[len(text)+1:] // after the body and the blank line
	return append(bytes.Clone(signed), sigLine...), nil
}
