package testvectors

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
	"github.com/gowebpki/jcs"
)

const sealedFile = "sealed.json"

// sealedVectors are sealed payloads (FORMATS.md, "Sealed payloads"):
// commitments from a salt and a payload; the events that carry one and
// that erase a subject; a bundle of a one-entry log that opens its sealed
// payload, and rejects.
type sealedVectors struct {
	Description string             `json:"description"`
	Commitments []commitmentVector `json:"commitments"`
	Events      []sealedEvent      `json:"events"`
	// Bundle: a range bundle of the log whose only entry is Events[0],
	// under bundles.json's key labelled log, with the opening of
	// Commitments[0] on its line.
	Policy  string         `json:"policy"`
	Bundle  string         `json:"bundle"`
	Rejects []bundleReject `json:"rejects"`
}

type commitmentVector struct {
	Name    string          `json:"name"`
	SaltHex string          `json:"salt_hex"`
	Payload json.RawMessage `json:"payload"`
	// Computed: the payload's RFC 8785 bytes, and the commitment.
	Canonical  string `json:"canonical"`
	Commitment string `json:"commitment"`
}

type sealedEvent struct {
	Name  string          `json:"name"`
	Event json.RawMessage `json:"event"`
	Entry string          `json:"entry"`
}

func TestSealedVectors(t *testing.T) {
	var f sealedVectors
	load(t, sealedFile, &f)
	if len(f.Commitments) == 0 || len(f.Events) == 0 {
		t.Fatal("sealed.json lacks vectors")
	}
	for i := range f.Commitments {
		v := &f.Commitments[i]
		salt, err := hex.DecodeString(v.SaltHex)
		if err != nil || len(salt) != event.SaltSize {
			t.Fatalf("%s: salt_hex is not %d bytes", v.Name, event.SaltSize)
		}
		canonical, err := jcs.Transform(v.Payload)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, sealedFile, v.Name, "canonical", &v.Canonical, string(canonical))
		// By hand, from FORMATS.md.
		h := sha256.Sum256(append(append([]byte("annal/sealed-payload/v1\n"), salt...), canonical...))
		expect(t, sealedFile, v.Name, "commitment", &v.Commitment, "sha256:"+hex.EncodeToString(h[:]))
		// The kernel's and the verifier's own code agree.
		if got := event.SealCommitment(salt, canonical); got != v.Commitment {
			t.Errorf("%s: kernel/event gives %s", v.Name, got)
		}
		if got := verifier.SealedCommitment(salt, canonical); got != v.Commitment {
			t.Errorf("%s: the verifier gives %s", v.Name, got)
		}
	}
	for i := range f.Events {
		v := &f.Events[i]
		var ev event.Event
		if err := json.Unmarshal(v.Event, &ev); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		entry, err := event.Encode(&ev)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		expect(t, sealedFile, v.Name, "entry", &v.Entry, string(entry))
		if _, err := event.Parse([]byte(v.Entry)); err != nil {
			t.Errorf("%s: the kernel's reader refuses it: %v", v.Name, err)
		}
		if _, err := verifier.ParseEvent([]byte(v.Entry)); err != nil {
			t.Errorf("%s: the verifier refuses it: %v", v.Name, err)
		}
	}

	// A one-entry log holding the sealed action, its bundle with the
	// opening written by hand.
	var bf bundleVectors
	load(t, bundlesFile, &bf)
	keys := deriveKeys(t, bundlesFile, bf.Keys)
	bf.Entries = []string{f.Events[0].Entry}
	leaf := sha256.Sum256(append([]byte{0}, f.Events[0].Entry...))
	expect(t, sealedFile, "policy", "policy", &f.Policy, fmt.Sprintf("log %s\nquorum none\n", keys["log"].vkey))
	p, err := verifier.ParsePolicy([]byte(f.Policy))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Commitments[0]
	salt, _ := hex.DecodeString(c.SaltHex)
	plain := writeBundle(t, &bf, keys, [][]byte{leaf[:]}, &bundleVector{Proof: "range", From: 0, To: 1}, nil)
	opened := fmt.Sprintf(`,"index":0,"opened":{"payload":"%s","salt":"%s"}}`,
		base64.StdEncoding.EncodeToString([]byte(c.Canonical)), base64.StdEncoding.EncodeToString(salt))
	expect(t, sealedFile, "bundle", "bundle", &f.Bundle, strings.Replace(plain, `,"index":0}`, opened, 1))
	res, err := verifier.VerifyBundle(strings.NewReader(f.Bundle), p, nil)
	if err != nil {
		t.Fatalf("the sealed bundle is refused: %v", err)
	}
	if res.Sealed.Opened != 1 {
		t.Errorf("sealed bundle: %+v, want 1 opened", res.Sealed)
	}
	// Without the opening (the subject erased) it verifies, closed.
	if res, err := verifier.VerifyBundle(strings.NewReader(plain), p, nil); err != nil || res.Sealed.Closed != 1 {
		t.Errorf("the bundle without its opening: %+v, %v", res, err)
	}
	for i := range f.Rejects {
		r := &f.Rejects[i]
		if r.Reason == "" || r.Old == "" {
			t.Fatalf("reject %q: bad inputs", r.Name)
		}
		expect(t, sealedFile, r.Name, "bundle", &r.Bundle, changeBundle(t, r, f.Bundle))
		_, err := verifier.VerifyBundle(strings.NewReader(r.Bundle), p, nil)
		if err == nil {
			t.Errorf("reject %q (%s): accepted", r.Name, r.Reason)
			continue
		}
		expect(t, sealedFile, r.Name, "go_error", &r.GoError, err.Error())
	}
	save(t, sealedFile, &f)
}
