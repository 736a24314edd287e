package witness

import (
	stded25519 "crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/annal-dev/annal/checkpoints"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// vkeyOf is the note verifier key of an Ed25519 public key (type 1),
// whatever its bytes: name, note's key hash (the first four bytes of
// SHA-256 of name, a newline and the key, big-endian), the key in base64.
func vkeyOf(name string, pub []byte) string {
	raw := append([]byte{checkpoints.Ed25519}, pub...)
	h := sha256.Sum256(append([]byte(name+"\n"), raw...))
	return fmt.Sprintf("%s+%08x+%s", name, binary.BigEndian.Uint32(h[:4]), base64.StdEncoding.EncodeToString(raw))
}

// A log's Ed25519 key gets the fast verifier, which takes the signatures
// the standard one takes and refuses the others; other keys keep theirs.
func TestFastEd25519(t *testing.T) {
	var withPlus string
	for i := 0; withPlus == "" && i < 200; i++ {
		_, vkey, err := note.GenerateKey(rand.Reader, "log.example")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.SplitN(vkey, "+", 3)[2], "+") {
			withPlus = vkey
		}
	}
	if withPlus == "" {
		t.Fatal("no key of 200 has a + in its base64")
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, "log.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{vkey, withPlus} {
		std, err := fnote.NewVerifier(k)
		if err != nil {
			t.Fatal(err)
		}
		fast := withFastEd25519(k, std)
		if _, ok := fast.(*fastEd25519); !ok || fast.Name() != std.Name() || fast.KeyHash() != std.KeyHash() {
			t.Fatalf("%s: %T %s %08x, want the fast verifier of %s %08x", k, fast, fast.Name(), fast.KeyHash(), std.Name(), std.KeyHash())
		}
	}

	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := note.Sign(&note.Note{Text: "log.example\n7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"}, signer)
	if err != nil {
		t.Fatal(err)
	}
	std, _ := fnote.NewVerifier(vkey)
	fast := withFastEd25519(vkey, std)
	if _, err := note.Open(signed, note.VerifierList(fast)); err != nil {
		t.Fatalf("the fast verifier refuses a good signature: %v", err)
	}
	tampered := []byte(strings.Replace(string(signed), "\n7\n", "\n8\n", 1))
	if _, err := note.Open(tampered, note.VerifierList(fast)); err == nil {
		t.Fatal("the fast verifier takes a signature of other text")
	}

	// A cosignature key (type 4) keeps its own verifier.
	cosigKey, err := fnote.VKeyToCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := fnote.NewVerifier(cosigKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := withFastEd25519(cosigKey, cv); got != cv {
		t.Fatalf("a cosignature key got %T", got)
	}
}

// FuzzFastEd25519AgreesWithStdlib: for any public key bytes, message and
// signature, or a key from a seed signing the message and the signature
// then flipped by arbitrary bits, the fast verifier says what
// crypto/ed25519 says.
func FuzzFastEd25519AgreesWithStdlib(f *testing.F) {
	seed := make([]byte, stded25519.SeedSize)
	priv := stded25519.NewKeyFromSeed(seed)
	good := stded25519.Sign(priv, []byte("m"))
	pubBytes := []byte(priv.Public().(stded25519.PublicKey))
	// S + L: the same signature with a non-canonical S, which crypto/ed25519 refuses.
	big := append([]byte{}, good...)
	l := []byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	carry := 0
	for i := range 32 {
		s := int(big[32+i]) + int(l[i]) + carry
		big[32+i], carry = byte(s), s>>8
	}
	identity := append([]byte{1}, make([]byte, 31)...)
	nonCanonical := append([]byte{0xee}, append(bytesOf(0xff, 30), 0x7f)...) // y = p + 1
	f.Add(true, seed, []byte("m"), make([]byte, 0), []byte{})
	f.Add(true, seed, []byte("m"), []byte{0, 0, 0, 1}, []byte{})
	f.Add(false, pubBytes, []byte("m"), []byte{}, good)
	f.Add(false, pubBytes, []byte("m"), []byte{}, big)
	f.Add(false, identity, []byte("m"), []byte{}, append(identity, make([]byte, 32)...))
	f.Add(false, nonCanonical, []byte("m"), []byte{}, good)
	f.Add(false, pubBytes, []byte("m"), []byte{}, append(identity, good[32:]...))
	f.Fuzz(func(t *testing.T, fromSeed bool, key, msg, flip, sig []byte) {
		var pub []byte
		if fromSeed {
			if len(key) != stded25519.SeedSize {
				return
			}
			priv := stded25519.NewKeyFromSeed(key)
			pub = priv.Public().(stded25519.PublicKey)
			sig = stded25519.Sign(priv, msg)
			for i, b := range flip {
				sig[i%len(sig)] ^= b
			}
		} else if len(key) == stded25519.PublicKeySize {
			pub = key
		} else {
			return
		}
		vkey := vkeyOf("fuzz.example", pub)
		std, err := note.NewVerifier(vkey)
		if err != nil {
			t.Fatal(err)
		}
		want := stded25519.Verify(pub, msg, sig)
		if got := withFastEd25519(vkey, std).Verify(msg, sig); got != want || std.Verify(msg, sig) != want {
			t.Fatalf("key %x, message %q, signature %x: fast %v, crypto/ed25519 %v", pub, msg, sig, got, want)
		}
	})
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// BenchmarkEd25519Verify: a log's note signature checked by the verifier
// note.NewVerifier makes (crypto/ed25519) and by the fast one.
func BenchmarkEd25519Verify(b *testing.B) {
	skey, vkey, err := note.GenerateKey(rand.Reader, "log.example")
	if err != nil {
		b.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	signed, _ := note.Sign(&note.Note{Text: "log.example\n7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"}, signer)
	std, err := fnote.NewVerifier(vkey)
	if err != nil {
		b.Fatal(err)
	}
	for name, v := range map[string]note.Verifier{"crypto-ed25519": std, "fast": withFastEd25519(vkey, std)} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := note.Open(signed, note.VerifierList(v)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
