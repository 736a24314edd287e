package testvectors

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/kernel/event"
)

const signedFile = "signed.json"

// signedVectors are signed requests (FORMATS.md, "Signed requests"):
// inputs given, statement, key and signature computed. Ed25519 signatures
// are deterministic, so every byte is a known answer.
type signedVectors struct {
	Description string         `json:"description"`
	Vectors     []signedVector `json:"vectors"`
}

type signedVector struct {
	Name     string          `json:"name"`
	SeedHex  string          `json:"seed_hex"`
	KeyName  string          `json:"key_name"`
	Origin   string          `json:"origin"`
	By       string          `json:"by"`
	Nonce    string          `json:"nonce"`
	Time     string          `json:"time"`
	Method   string          `json:"method"`
	Path     string          `json:"path"`
	Body     json.RawMessage `json:"body,omitempty"`
	Verifier string          `json:"verifier_key"`
	KeyID    string          `json:"key_id"`
	Request  string          `json:"request"`
	Stmt     string          `json:"statement"`
	Sig      string          `json:"sig"`
	Header   string          `json:"header"`
}

func TestSignedRequestVectors(t *testing.T) {
	var f signedVectors
	load(t, signedFile, &f)
	if len(f.Vectors) == 0 {
		t.Fatal("signed.json has no vectors")
	}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		seed, err := hex.DecodeString(v.SeedHex)
		if err != nil || len(seed) != ed25519.SeedSize {
			t.Fatalf("%s: seed_hex", v.Name)
		}
		priv := ed25519.NewKeyFromSeed(seed)
		// An x/mod note signer key of this seed: "PRIVATE+KEY+name+id+base64(0x01||seed)".
		pub := append([]byte{1}, priv.Public().(ed25519.PublicKey)...)
		id := keyID(v.KeyName, pub)
		vkey := fmt.Sprintf("%s+%08x+%s", v.KeyName, id, base64.StdEncoding.EncodeToString(pub))
		expect(t, signedFile, v.Name, "verifier_key", &v.Verifier, vkey)
		expect(t, signedFile, v.Name, "key_id", &v.KeyID, fmt.Sprintf("%08x", id))
		sk, err := event.ParseSigningKey(v.Verifier)
		if err != nil {
			t.Fatal(err)
		}

		req, err := event.CanonicalRequest(v.Method, v.Path, v.Body)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, signedFile, v.Name, "request", &v.Request, string(req))
		at, err := event.ParseInstant(v.Time)
		if err != nil {
			t.Fatal(err)
		}
		stmt, err := event.SignedStatement(v.Origin, v.By, v.Nonce, at, req)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, signedFile, v.Name, "statement", &v.Stmt, string(stmt))
		// The client builds the same bytes on its own.
		cstmt, err := client.SignedStatement(v.Origin, v.By, v.Nonce, v.Time, v.Method, v.Path, v.Body)
		if err != nil || string(cstmt) != string(stmt) {
			t.Errorf("%s: the client's statement differs:\n%s\n%s", v.Name, cstmt, stmt)
		}
		sig := ed25519.Sign(priv, stmt)
		expect(t, signedFile, v.Name, "sig", &v.Sig, base64.StdEncoding.EncodeToString(sig))
		if !sk.Verify(stmt, sig) {
			t.Errorf("%s: the signature does not verify under the verifier key", v.Name)
		}
		expect(t, signedFile, v.Name, "header", &v.Header, fmt.Sprintf("key=%s, nonce=%s, time=%s, sig=%s", v.KeyID, v.Nonce, v.Time, v.Sig))
	}
	save(t, signedFile, &f)
}

// keyID is the signed-note key ID: the first 4 bytes of
// SHA-256(name || 0x0A || 0x01 || key), big-endian.
func keyID(name string, algKey []byte) uint32 {
	h := sha256.Sum256(append(append([]byte(name), '\n'), algKey...))
	return binary.BigEndian.Uint32(h[:4])
}
