package witness

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

func mustCosigner(t *testing.T) *Cosigner {
	t.Helper()
	skey, _, err := LoadOrCreateKey(filepath.Join(t.TempDir(), KeyFileName), testWitnessName)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestKey_CreatedOnceWithMode0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), KeyFileName)
	skey, created, err := LoadOrCreateKey(path, "witness.example.com/w1")
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode %04o, want 0600", perm)
	}
	if !strings.HasPrefix(skey, "PRIVATE+KEY+witness.example.com/w1+") {
		t.Errorf("key %q is not an x/mod note signer key named witness.example.com/w1", skey[:20])
	}
	again, created, err := LoadOrCreateKey(path, "")
	if err != nil || created || again != skey {
		t.Fatalf("second start: created %v, same key %v, %v", created, again == skey, err)
	}
	if _, _, err := LoadOrCreateKey(path, "witness.example.com/w1"); err != nil {
		t.Errorf("same name on a later start: %v", err)
	}
	if _, _, err := LoadOrCreateKey(path, "witness.example.com/w2"); err == nil || !strings.Contains(err.Error(), `named "witness.example.com/w1"`) {
		t.Errorf("another name on a later start: %v", err)
	}
}

func TestKey_RefusesLooseModeAndBadKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, KeyFileName)
	if _, _, err := LoadOrCreateKey(path, "has space"); err == nil {
		t.Error("invalid name accepted")
	}
	if _, _, err := LoadOrCreateKey(path, ""); err == nil {
		t.Error("empty name accepted")
	}
	if _, _, err := LoadOrCreateKey(path, "w"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKey(path, ""); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("mode 0644: %v", err)
	}
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKey(path, ""); err == nil {
		t.Error("garbage key accepted")
	}
	if _, err := NewCosigner("PRIVATE+KEY+w+00000000+AAAA"); err == nil {
		t.Error("malformed signer key accepted")
	}
}

// TestKey_VerifierKeyIsCosignatureV1 checks the printed key: signature type
// 0x04, and the key ID that c2sp.org/tlog-cosignature defines.
func TestKey_VerifierKeyIsCosignatureV1(t *testing.T) {
	c := mustCosigner(t)
	parts := strings.SplitN(c.VerifierKey(), "+", 3)
	raw, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	if len(parts) != 3 || parts[0] != testWitnessName || err != nil || len(raw) != 33 || raw[0] != 0x04 {
		t.Fatalf("verifier key %q is not <name>+<hash>+base64(0x04 || key)", c.VerifierKey())
	}
	v, err := fnote.NewVerifierForCosignatureV1(c.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if v.KeyHash() != c.Signer().KeyHash() || v.Name() != c.Name() {
		t.Errorf("verifier %s/%08x does not match signer %s/%08x", v.Name(), v.KeyHash(), c.Name(), c.Signer().KeyHash())
	}
	signed, err := note.Sign(&note.Note{Text: "example.com/log\n1\n" + strings.Repeat("A", 43) + "=\n"}, c.Signer())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(signed, note.VerifierList(v)); err != nil {
		t.Errorf("cosignature does not verify with the printed key: %v", err)
	}
}
