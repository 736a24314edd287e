package testvectors

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
)

// §14.7: the sealed delta of deltas.json commits to its changes as a
// sealed payload does: SHA-256 of the context, the salt (32 bytes 0x5a)
// and the RFC 8785 bytes of the changes its description gives.
func TestSpec004_14_7_SealedDeltaCommitment(t *testing.T) {
	var f deltaVectors
	load(t, deltasFile, &f)
	var sealed *delta.Delta
	for i := range f.Chain {
		if f.Chain[i].Delta.Sealed != nil {
			sealed = &f.Chain[i].Delta
		}
	}
	if sealed == nil {
		t.Fatal("deltas.json has no sealed delta")
	}
	changes := []delta.Change{{Path: "notes/plan.md", Operation: delta.OpModify, ContentHash: "sha256:" + strings.Repeat("c", 64)}}
	raw, _ := json.Marshal(changes)
	canonical, err := event.Canonical(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Description, string(canonical)) {
		t.Errorf("the description does not give the changes %s", canonical)
	}
	salt := []byte(strings.Repeat("\x5a", 32))
	if got := event.SealCommitment(salt, canonical); got != sealed.Sealed.Commitment {
		t.Errorf("commitment %s, computed %s", sealed.Sealed.Commitment, got)
	}
}
