package testvectors

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/checkpoints"
)

// keyVector is an Ed25519 note key derived from a fixed seed. Label, Name
// and SeedHex are inputs; the rest is computed.
type keyVector struct {
	Label        string `json:"label"`
	Name         string `json:"name"`
	SeedHex      string `json:"seed_hex"`
	PublicKeyHex string `json:"public_key_hex"`
	KeyID        string `json:"key_id"`
	PrivateKey   string `json:"private_key"`
	VerifierKey  string `json:"verifier_key"`
}

// noteKey is a key ready to sign and verify, built from a keyVector.
type noteKey struct {
	name     string
	id       uint32
	priv     ed25519.PrivateKey
	signer   note.Signer
	verifier note.Verifier
	vkey     string
}

// deriveKeys computes every key of a file by hand from c2sp.org/signed-note,
// checks the result against x/mod note and Annal's key parsers, and returns
// the keys by label.
func deriveKeys(t *testing.T, file string, keys []keyVector) map[string]*noteKey {
	t.Helper()
	out := map[string]*noteKey{}
	for i := range keys {
		k := &keys[i]
		seed, err := hex.DecodeString(k.SeedHex)
		if err != nil || len(seed) != ed25519.SeedSize {
			t.Fatalf("%s: key %q: seed_hex is not 32 bytes of hex", file, k.Label)
		}
		priv := ed25519.NewKeyFromSeed(seed)
		pub := priv.Public().(ed25519.PublicKey)
		// The key id is the first 4 bytes of SHA-256(name || "\n" || 0x01 || public key).
		typed := append([]byte{checkpoints.Ed25519}, pub...)
		sum := sha256.Sum256(append([]byte(k.Name+"\n"), typed...))
		id := binary.BigEndian.Uint32(sum[:4])
		skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", k.Name, id, base64.StdEncoding.EncodeToString(append([]byte{checkpoints.Ed25519}, seed...)))
		vkey := fmt.Sprintf("%s+%08x+%s", k.Name, id, base64.StdEncoding.EncodeToString(typed))

		expect(t, file, k.Label, "public_key_hex", &k.PublicKeyHex, hex.EncodeToString(pub))
		expect(t, file, k.Label, "key_id", &k.KeyID, fmt.Sprintf("%08x", id))
		expect(t, file, k.Label, "private_key", &k.PrivateKey, skey)
		expect(t, file, k.Label, "verifier_key", &k.VerifierKey, vkey)

		if lib, err := note.NewEd25519VerifierKey(k.Name, pub); err != nil || lib != vkey {
			t.Errorf("%s: key %q: x/mod note makes verifier key %q, %v", file, k.Label, lib, err)
		}
		signer, err := checkpoints.NewLogSigner(skey)
		if err != nil {
			t.Fatalf("%s: key %q: %v", file, k.Label, err)
		}
		verifier, err := checkpoints.NewLogVerifier(vkey)
		if err != nil {
			t.Fatalf("%s: key %q: %v", file, k.Label, err)
		}
		if signer.KeyHash() != id || verifier.KeyHash() != id {
			t.Errorf("%s: key %q: key ids %08x (signer), %08x (verifier), want %08x", file, k.Label, signer.KeyHash(), verifier.KeyHash(), id)
		}
		out[k.Label] = &noteKey{name: k.Name, id: id, priv: priv, signer: signer, verifier: verifier, vkey: vkey}
	}
	return out
}

// signByHand builds a signed note from c2sp.org/signed-note without any
// library: the text, a blank line, then per key "— <name> <base64(key id ||
// Ed25519 signature of the text)>".
func signByHand(text string, keys ...*noteKey) string {
	out := text + "\n"
	for _, k := range keys {
		sig := make([]byte, 4, 4+ed25519.SignatureSize)
		binary.BigEndian.PutUint32(sig, k.id)
		sig = append(sig, ed25519.Sign(k.priv, []byte(text))...)
		out += "— " + k.name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
	}
	return out
}
