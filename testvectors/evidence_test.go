package testvectors

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/annal-dev/annal/format/evidence"
	"github.com/annal-dev/annal/verifier"
)

const evidenceFile = "evidence.json"

// evidenceVectors: one log key and two histories that share a prefix. Each
// vector names the history and size of its two checkpoints; the evidence
// file is computed (RFC 6962 by hand, checkpoints signed by hand-checked
// code) and must verify, or, for a reject, must be refused.
type evidenceVectors struct {
	Description string           `json:"description"`
	Keys        []keyVector      `json:"keys"`
	Honest      []string         `json:"honest"`
	Forked      []string         `json:"forked"`
	Vectors     []evidenceVector `json:"vectors"`
}

type evidenceVector struct {
	Name string `json:"name"`
	// Small and Large say which history ("honest" or "forked") and size
	// each checkpoint is of.
	Small    evidenceSide `json:"small"`
	Large    evidenceSide `json:"large"`
	Valid    bool         `json:"valid"`
	Reason   string       `json:"reason,omitempty"`
	Evidence string       `json:"evidence"`
	GoError  string       `json:"go_error,omitempty"`
}

type evidenceSide struct {
	History string `json:"history"`
	Size    uint64 `json:"size"`
}

func TestEvidenceVectors(t *testing.T) {
	var f evidenceVectors
	load(t, evidenceFile, &f)
	keys := deriveKeys(t, evidenceFile, f.Keys)
	log := keys["log"]
	histories := map[string][][]byte{}
	for name, entries := range map[string][]string{"honest": f.Honest, "forked": f.Forked} {
		for _, e := range entries { // leaf hashes, SHA-256(0x00 || entry)
			h := sha256.Sum256(append([]byte{0}, e...))
			histories[name] = append(histories[name], h[:])
		}
	}
	if len(f.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		small, large := histories[v.Small.History], histories[v.Large.History]
		if small == nil || large == nil || v.Small.Size > uint64(len(small)) || v.Large.Size > uint64(len(large)) {
			t.Fatalf("vector %q: bad inputs", v.Name)
		}
		ev := evidence.File{Format: evidence.Format, Origin: log.name, LogKey: log.vkey,
			Checkpoints: [2]string{signTree(t, log, small, v.Small.Size), signTree(t, log, large, v.Large.Size)}}
		if v.Small.Size != v.Large.Size {
			ev.PrefixRoot = base64.StdEncoding.EncodeToString(mth(large[:v.Small.Size]))
			for _, h := range rfcConsistency(v.Small.Size, large[:v.Large.Size]) {
				ev.ConsistencyProof = append(ev.ConsistencyProof, base64.StdEncoding.EncodeToString(h))
			}
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, evidenceFile, v.Name, "evidence", &v.Evidence, string(raw))
		_, err = verifier.VerifyEvidence([]byte(v.Evidence), log.vkey)
		switch {
		case v.Valid && err != nil:
			t.Errorf("vector %q: valid evidence refused: %v", v.Name, err)
		case !v.Valid && err == nil:
			t.Errorf("vector %q (%s): evidence accepted", v.Name, v.Reason)
		case !v.Valid:
			if v.Reason == "" {
				t.Errorf("vector %q gives no reason", v.Name)
			}
			expect(t, evidenceFile, v.Name, "go_error", &v.GoError, err.Error())
		}
	}
	save(t, evidenceFile, &f)
}
