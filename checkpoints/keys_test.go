package checkpoints

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/mod/sumdb/note"
)

const testOrigin = "log.annal.example/test"

// fixedKey builds, by hand from c2sp.org/signed-note, the key pair whose
// Ed25519 seed is the 32 bytes first, first+1, ... Ed25519 signatures are
// deterministic, so everything signed with it is the same on every run,
// which fuzz corpora and known answers need.
func fixedKey(name string, first byte) (skey, vkey string) {
	seed := seedFrom(first)
	pub := append([]byte{Ed25519}, ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)...)
	id := keyID(name, pub)
	skey = fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, id, base64.StdEncoding.EncodeToString(append([]byte{Ed25519}, seed...)))
	vkey = fmt.Sprintf("%s+%08x+%s", name, id, base64.StdEncoding.EncodeToString(pub))
	return skey, vkey
}

// keyID is the signed-note key id: the first four bytes, big-endian, of
// SHA-256(name || "\n" || algorithm byte || public key).
func keyID(name string, algAndKey []byte) uint32 {
	h := sha256.Sum256(append([]byte(name+"\n"), algAndKey...))
	return binary.BigEndian.Uint32(h[:4])
}

func mustSigner(t testing.TB, skey string) note.Signer {
	t.Helper()
	s, err := NewLogSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustVerifier(t testing.TB, vkey string) note.Verifier {
	t.Helper()
	v, err := NewLogVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestGenerateLogKey_SignsAndVerifies(t *testing.T) {
	skey, vkey, err := GenerateLogKey(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(skey, "PRIVATE+KEY+"+testOrigin+"+") {
		t.Errorf("private key %q does not start with PRIVATE+KEY+<origin>+", skey)
	}
	if !strings.HasPrefix(vkey, testOrigin+"+") {
		t.Errorf("verifier key %q does not start with <origin>+", vkey)
	}
	s := mustSigner(t, skey)
	v := mustVerifier(t, vkey)
	if s.Name() != testOrigin || v.Name() != testOrigin || s.KeyHash() != v.KeyHash() {
		t.Fatalf("signer %s/%08x and verifier %s/%08x do not match", s.Name(), s.KeyHash(), v.Name(), v.KeyHash())
	}
	c := Checkpoint{Origin: testOrigin, Size: 3, Hash: sha256.Sum256([]byte("root"))}
	signed, err := SignCheckpoint(c, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCheckpoint(signed, v); err != nil {
		t.Errorf("a checkpoint signed with a generated key does not open with its verifier: %v", err)
	}

	_, other, err := GenerateLogKey(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	if other == vkey {
		t.Error("two generated keys are equal: the key is not random")
	}
}

func TestGenerateLogKey_RefusesBadOrigin(t *testing.T) {
	for _, origin := range []string{"", "has space", "a+b"} {
		if _, _, err := GenerateLogKey(origin); err == nil || !strings.Contains(err.Error(), "origin") {
			t.Errorf("GenerateLogKey(%q) = %v, want an origin error", origin, err)
		}
	}
}

func TestFixedKey_MatchesXModNote(t *testing.T) {
	skey, vkey := fixedKey(testOrigin, 0)
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatalf("x/mod note refuses the hand-built private key: %v", err)
	}
	pub := ed25519.NewKeyFromSeed(seedFrom(0)).Public().(ed25519.PublicKey)
	want, err := note.NewEd25519VerifierKey(testOrigin, pub)
	if err != nil {
		t.Fatal(err)
	}
	if vkey != want {
		t.Errorf("hand-built verifier key %q, x/mod note builds %q", vkey, want)
	}
	if v := mustVerifier(t, vkey); v.KeyHash() != s.KeyHash() {
		t.Errorf("key hash %08x, signer's %08x", v.KeyHash(), s.KeyHash())
	}
}

func seedFrom(first byte) []byte {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = first + byte(i)
	}
	return seed
}

func TestNewLogSigner(t *testing.T) {
	skey, _ := fixedKey(testOrigin, 0)
	if _, err := NewLogSigner("  " + skey + "\n"); err != nil {
		t.Errorf("a key file with surrounding white space is refused: %v", err)
	}
	_, vkey := fixedKey(testOrigin, 0)
	for name, bad := range map[string]string{
		"verifier key":     vkey,
		"empty":            "",
		"wrong key id":     "PRIVATE+KEY+" + testOrigin + "+00000000+" + skey[strings.LastIndex(skey, "+")+1:],
		"other name":       strings.Replace(skey, testOrigin, "log.annal.example/other", 1),
		"truncated base64": skey[:len(skey)-4],
	} {
		if _, err := NewLogSigner(bad); err == nil || !strings.Contains(err.Error(), "log signing key") {
			t.Errorf("%s: NewLogSigner = %v, want a log signing key error", name, err)
		}
	}
}

func TestNewLogVerifier_RefusesNonEd25519(t *testing.T) {
	pub := ed25519.NewKeyFromSeed(seedFrom(0)).Public().(ed25519.PublicKey)
	// The same key as a cosignature/v1 key (type 0x04), with a correct key
	// id, so only the algorithm is wrong.
	for _, alg := range []byte{0x02, 0x04, 0xff} {
		key := append([]byte{alg}, pub...)
		vkey := fmt.Sprintf("%s+%08x+%s", testOrigin, keyID(testOrigin, key), base64.StdEncoding.EncodeToString(key))
		_, err := NewLogVerifier(vkey)
		if err == nil || !strings.Contains(err.Error(), "unknown verifier algorithm") {
			t.Errorf("algorithm %#x: NewLogVerifier = %v, want unknown verifier algorithm", alg, err)
		}
	}
}

func TestNewLogVerifier(t *testing.T) {
	_, vkey := fixedKey(testOrigin, 0)
	v, err := NewLogVerifier(" " + vkey + "\n")
	if err != nil {
		t.Fatalf("a key file with surrounding white space is refused: %v", err)
	}
	if v.Name() != testOrigin {
		t.Errorf("name %q, want %q", v.Name(), testOrigin)
	}
	short := fmt.Sprintf("%s+%08x+%s", testOrigin, keyID(testOrigin, []byte{Ed25519, 1, 2}), base64.StdEncoding.EncodeToString([]byte{Ed25519, 1, 2}))
	for name, tc := range map[string]struct{ vkey, wantErr string }{
		"wrong key id":     {testOrigin + "+00000000+" + vkey[strings.LastIndex(vkey, "+")+1:], "invalid verifier hash"},
		"short public key": {short, "malformed verifier id"},
		"private key":      {func() string { s, _ := fixedKey(testOrigin, 0); return s }(), "malformed verifier id"},
		"empty":            {"", "malformed verifier id"},
	} {
		if _, err := NewLogVerifier(tc.vkey); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: NewLogVerifier = %v, want %q", name, err, tc.wantErr)
		}
	}
}

func TestValidateOrigin(t *testing.T) {
	for _, ok := range []string{testOrigin, "a", "example.com", "日本.example/log", strings.Repeat("a", 255)} {
		if err := ValidateOrigin(ok); err != nil {
			t.Errorf("ValidateOrigin(%q) = %v, want nil", ok, err)
		}
	}
	for _, tc := range []struct{ origin, wantErr string }{
		{"", "origin is empty"},
		{strings.Repeat("a", 256), "longer than 255 bytes"},
		{"a+b", "contains '+'"},
		{"a b", "space or control character"},
		{"a\tb", "space or control character"},
		{"a\rb", "space or control character"},
		{"a\nb", "space or control character"},
		{"a\x00b", "space or control character"},
		{"a\x7fb", "space or control character"},
		{"a\u00a0b", "space or control character"},
		{"a\u2003b", "space or control character"},
		{"a\u3000b", "space or control character"},
		{"a\xffb", "not valid UTF-8"},
	} {
		err := ValidateOrigin(tc.origin)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ValidateOrigin(%q) = %v, want %q", tc.origin, err, tc.wantErr)
		}
	}
}

// TestValidateOrigin_CoversNoteKeyNames checks the rule against x/mod
// note's: every origin ValidateOrigin accepts can name a note key, and every
// Unicode space, which a key name may not hold, is refused.
func TestValidateOrigin_CoversNoteKeyNames(t *testing.T) {
	pub := append([]byte{Ed25519}, ed25519.NewKeyFromSeed(seedFrom(0)).Public().(ed25519.PublicKey)...)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		origin := "a" + string(r) + "b"
		err := ValidateOrigin(origin)
		if unicode.IsSpace(r) && err == nil {
			t.Errorf("ValidateOrigin accepts %q, which holds a Unicode space", origin)
		}
		if err == nil && r < 0x3100 {
			vkey := fmt.Sprintf("%s+%08x+%s", origin, keyID(origin, pub), base64.StdEncoding.EncodeToString(pub))
			if _, err := note.NewVerifier(vkey); err != nil {
				t.Errorf("ValidateOrigin accepts %q, which x/mod note refuses as a key name: %v", origin, err)
			}
		}
	}
}

func TestVerifierKeyOfDerivesThePublicKey(t *testing.T) {
	skey, vkey, err := GenerateLogKey("example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifierKeyOf(skey)
	if err != nil {
		t.Fatal(err)
	}
	if got != vkey {
		t.Fatalf("derived %q, generated %q", got, vkey)
	}
	for _, bad := range []string{"", "PRIVATE+KEY+a+b", vkey, strings.Replace(skey, "PRIVATE", "PUBLIC", 1), skey[:len(skey)-4] + "AAAA"} {
		if _, err := VerifierKeyOf(bad); err == nil {
			t.Errorf("VerifierKeyOf(%q) derived a key", bad)
		}
	}
}
