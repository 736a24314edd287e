package delta

import (
	"encoding/json"
	"testing"
)

// FuzzDelta reads JSON into a Delta and checks that Validate, Seal, Hash
// and Append never panic, that a sealed delta always validates and hashes
// the same twice, that a sealed first delta starts a chain exactly when
// all its changes are creates, and that StateAt reads the chain Append
// accepts.
func FuzzDelta(f *testing.F) {
	for _, d := range sealChain(f, kat()) {
		b, err := json.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, seed := range []string{
		`{}`, `null`, `[]`, `{"delta_id":"x"}`,
		`{"delta_id":"00000000-0000-4000-8000-000000000001","turn_id":"t","session_id":"s","agent_did":"a","timestamp":"2026-01-02T03:04:05Z","changes":[{"path":"../x","operation":"create","content_hash":"sha256:` + "00" + `"}],"parent_hash":"` + ZeroHash + `"}`,
		`{"parent_hash":"zz"}`, `{"timestamp":"2026-01-02T03:04:05+01:00"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Delta
		if json.Unmarshal(data, &d) != nil {
			return
		}
		_ = d.Validate()
		_, _ = d.Hash()
		if d.Seal() != nil {
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("a sealed delta does not validate: %v", err)
		}
		if h, err := d.Hash(); err != nil || h != d.DeltaHash {
			t.Fatalf("Hash after Seal = %s, %v; DeltaHash %s", h, err, d.DeltaHash)
		}
		allCreates := true
		for _, c := range d.Changes {
			allCreates = allCreates && c.Operation == OpCreate
		}
		err := NewChain(d.SessionID).Append(d)
		if want := d.ParentHash == ZeroHash && allCreates; (err == nil) != want {
			t.Fatalf("Append of a sealed first delta: %v; want accepted = %v", err, want)
		}
		if err == nil {
			if _, verr := StateAt([]Delta{d}, d.TurnID); verr != nil {
				t.Fatalf("Append accepts, StateAt refuses: %v", verr)
			}
		}
	})
}
