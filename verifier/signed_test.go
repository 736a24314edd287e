package verifier

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/annal-dev/annal/format/bundle"
	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/note"
)

const signedOrigin = "example.com/signed"

func jcsOf(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func eventID(i int) string { return fmt.Sprintf("019a5c3e-0000-7000-8000-%012x", i) }

// signedAction is an action event by agent-a signed with s over the
// request rebuilt from its action (testvectors/FORMATS.md), written by
// hand here, apart from the verifier's code.
func signedAction(t *testing.T, s note.Signer, i int, nonce string, payload int) map[string]any {
	t.Helper()
	action := map[string]any{"type": "create", "target": fmt.Sprintf("notes/%d", i), "payload": map[string]any{"n": payload}, "envelope": "env-1"}
	request := map[string]any{"method": "POST", "path": "/v1/actions", "body": action}
	at := "2026-11-22T10:00:00Z"
	stmt := append([]byte("annal/signed-request/v1\n"), jcsOf(t, map[string]any{
		"by": "agent-a", "nonce": nonce, "origin": signedOrigin, "request": request, "time": at})...)
	sig, err := s.Sign(stmt)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"v": 1, "id": eventID(i), "time": fmt.Sprintf("2026-11-22T10:01:%02dZ", i), "kind": "action", "actor": "agent-a",
		"action":   action,
		"decision": map[string]any{"cost": 10, "outcome": "committed", "reserved": 10, "settled": 10},
		"signed":   map[string]any{"by": "agent-a", "key": fmt.Sprintf("%08x", s.KeyHash()), "nonce": nonce, "time": at, "sig": base64.StdEncoding.EncodeToString(sig)}}
}

func signedTestLog(t *testing.T, events ...map[string]any) (*testLog, *Policy) {
	t.Helper()
	l := newTestLog(t, signedOrigin, 0)
	for _, e := range events {
		l.append(jcsOf(t, e))
	}
	p, err := KeyPolicy(l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	return l, p
}

func agentCreated(vkey string) map[string]any {
	return map[string]any{"v": 1, "id": eventID(0), "time": "2026-11-22T10:00:00Z", "kind": "actor.created", "actor": "root",
		"subject": map[string]any{"id": "agent-a", "kind": "agent", "name": "a", "purpose": "p", "creator": "root",
			"credential_sha256": strings.Repeat("0", 64), "signing_key": vkey}}
}

func verifySigned(t *testing.T, l *testLog, p *Policy, spec bundleSpec) (*BundleResult, error) {
	t.Helper()
	return VerifyBundle(bytes.NewReader(l.bundle(spec)), p, nil)
}

func TestSignatures_CountedAndChecked(t *testing.T) {
	skey, vkey, err := note.GenerateKey(rand.Reader, "agent-a-key")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	unsigned := signedAction(t, s, 2, "nonce-unsigned-00000", 2)
	delete(unsigned, "signed")
	l, p := signedTestLog(t, agentCreated(vkey), signedAction(t, s, 1, "nonce-0000000000000001", 1), unsigned)
	res, err := verifySigned(t, l, p, bundleSpec{proof: bundle.ProofRange, from: 0, to: 3})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Signatures["agent-a"]; c == nil || c.Signed != 1 || c.Unsigned != 1 || c.Unverifiable != 0 {
		t.Fatalf("signatures %+v, want 1 signed and 1 unsigned", c)
	}
	// A selection without the key's registration cannot check the
	// signature: it says so rather than calling it signed.
	res, err = verifySigned(t, l, p, bundleSpec{proof: bundle.ProofInclusion, indices: []uint64{1}})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Signatures["agent-a"]; c == nil || c.Unverifiable != 1 || c.Signed != 0 {
		t.Fatalf("sparse bundle: %+v, want 1 unverifiable", c)
	}
}

func TestSignatures_AlteredReplayedOrRevokedFail(t *testing.T) {
	skey, vkey, _ := note.GenerateKey(rand.Reader, "agent-a-key")
	s, _ := note.NewSigner(skey)
	otherKey, _, _ := note.GenerateKey(rand.Reader, "other")
	other, _ := note.NewSigner(otherKey)

	altered := signedAction(t, s, 1, "nonce-0000000000000001", 1)
	altered["action"].(map[string]any)["payload"] = map[string]any{"n": 666} // the kernel changed it after signing
	replayed := signedAction(t, s, 2, "nonce-0000000000000001", 2)
	revoke := map[string]any{"v": 1, "id": eventID(2), "time": "2026-11-22T10:01:02Z", "kind": "actor.key", "actor": "root",
		"key_change": map[string]any{"actor": "agent-a"}}
	for _, tc := range []struct {
		name   string
		events []map[string]any
		want   string
	}{
		{"altered payload", []map[string]any{agentCreated(vkey), altered}, "entry 1 (action by agent-a): the signature of agent-a does not verify"},
		{"replayed nonce", []map[string]any{agentCreated(vkey), signedAction(t, s, 1, "nonce-0000000000000001", 1), replayed}, "already used by entry 1"},
		{"revoked key", []map[string]any{agentCreated(vkey), signedAction(t, s, 1, "nonce-0000000000000001", 1), revoke, signedAction(t, s, 3, "nonce-0000000000000003", 3)}, "entry 3 (action by agent-a): signed by agent-a, who has no signing key"},
		{"another key", []map[string]any{agentCreated(vkey), signedAction(t, other, 1, "nonce-0000000000000001", 1)}, "but agent-a's signing key there is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, p := signedTestLog(t, tc.events...)
			_, err := verifySigned(t, l, p, bundleSpec{proof: bundle.ProofRange, from: 0, to: uint64(len(tc.events))})
			var ve *Error
			if !errors.As(err, &ve) || ve.Check != CheckSignature || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a %s failure naming %q", err, CheckSignature, tc.want)
			}
		})
	}
}

// An entry of a kind the verifier does not know, with "action":null and a
// signed member, is refused or passed over, never a panic (a panic in a
// bundle's worker would take the whole process down).
func TestReadSigning_NullActionIsNoPanic(t *testing.T) {
	entry := []byte(`{"action":null,"actor":"agent-x","id":"e1","kind":"x.future","signed":{"key":"ed25519:AAAA","nonce":"n","sig":"AAAA","time":"2026-11-28T00:00:00Z"},"time":"2026-11-28T00:00:00Z","v":1}`)
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("readSigning panics on \"action\":null: %v", r)
		}
	}()
	if _, err := readSigning("x.future", entry); err == nil {
		t.Log("passed over")
	}
}
