package witness

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// cosignerAndFormats makes a witness key, and returns the witness's
// Cosigner of it and formats' cosignature/v1 signer of the same key.
func cosignerAndFormats(tb testing.TB) (*Cosigner, note.Signer) {
	tb.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, "witness.example")
	if err != nil {
		tb.Fatal(err)
	}
	c, err := NewCosigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	theirs, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		tb.Fatal(err)
	}
	return c, theirs
}

// The witness's Ed25519 cosignature is formats' own, byte for byte, for
// the same second, and formats' verifier takes it; a note formats refuses
// to cosign is refused too.
func TestEd25519CosignerMatchesFormats(t *testing.T) {
	c, theirs := cosignerAndFormats(t)
	ours := c.Signer()
	if ours.Name() != theirs.Name() || ours.KeyHash() != theirs.KeyHash() {
		t.Fatalf("ours %s %08x, formats' %s %08x", ours.Name(), ours.KeyHash(), theirs.Name(), theirs.KeyHash())
	}
	verifier, err := fnote.NewVerifierForCosignatureV1(c.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{
		"log.example\n7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
		"log.example/with/path\n18446744073709551615\nqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqo=\nextension line\n",
	} {
		var a, b []byte
		for range 5 { // until both fall in one second
			before := time.Now().Unix()
			b, err = theirs.Sign([]byte(msg))
			if err != nil {
				t.Fatal(err)
			}
			at := time.Unix(before, 0)
			c.signer.now = func() time.Time { return at }
			a, err = ours.Sign([]byte(msg))
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().Unix() == before {
				break
			}
		}
		c.signer.now = time.Now
		if !bytes.Equal(a, b) {
			t.Fatalf("%q: ours %x, formats' %x", msg, a, b)
		}
		if !verifier.Verify([]byte(msg), a) {
			t.Fatalf("%q: formats' verifier refuses our cosignature", msg)
		}
	}
	for _, short := range []string{"", "one line\n", "two\nlines"} {
		_, errOurs := ours.Sign([]byte(short))
		_, errTheirs := theirs.Sign([]byte(short))
		if (errOurs == nil) != (errTheirs == nil) {
			t.Errorf("%q: ours %v, formats' %v", short, errOurs, errTheirs)
		}
	}
}

// BenchmarkCosignEd25519: one cosignature/v1 Ed25519 signature by formats'
// signer (crypto/ed25519) and by the witness's.
func BenchmarkCosignEd25519(b *testing.B) {
	c, theirs := cosignerAndFormats(b)
	msg := []byte("log.example\n7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")
	for name, s := range map[string]note.Signer{"formats": theirs, "witness": c.Signer()} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Sign(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
