package testvectors

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/annal-dev/annal/format/bundle"
	"github.com/annal-dev/annal/format/evidence"
)

// The shared declarations (format/) name the values FORMATS.md gives.
func TestFormatDeclarations(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"bundle.Format", bundle.Format, "annal.dev/audit-bundle/v1"},
		{"bundle.ProofRange", bundle.ProofRange, "range"},
		{"bundle.ProofInclusion", bundle.ProofInclusion, "inclusion"},
		{"bundle.MaxLineSize", bundle.MaxLineSize, 131072},
		{"evidence.Format", evidence.Format, "annal.dev/equivocation-evidence/v1"},
		{"evidence.MaxSize", evidence.MaxSize, 48 * 1024},
	} {
		if c.got != c.want {
			t.Errorf("%s is %v, FORMATS.md says %v", c.name, c.got, c.want)
		}
	}
}

// The writer's side of the bundle format (format/bundle, which the kernel
// writes with) gives, line for line, the bytes of every bundle vector,
// which the test writes from FORMATS.md alone.
func TestBundleVectors_SharedDeclarations(t *testing.T) {
	var f bundleVectors
	load(t, bundlesFile, &f)
	canonical := func(v any) string {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		c, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		return string(c)
	}
	for _, v := range f.Vectors {
		lines := strings.Split(strings.TrimSuffix(v.Bundle, "\n"), "\n")
		var h bundle.Header
		if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
			t.Fatalf("vector %q: header: %v", v.Name, err)
		}
		if got := canonical(h); got != lines[0] {
			t.Errorf("vector %q: bundle.Header encodes the header as\n%s\nnot\n%s", v.Name, got, lines[0])
		}
		if h.Bundle != bundle.Format || h.Proof != v.Proof {
			t.Errorf("vector %q: header names %q, proof %q", v.Name, h.Bundle, h.Proof)
		}
		for i, line := range lines {
			if len(line) > bundle.MaxLineSize {
				t.Errorf("vector %q: line %d is %d bytes", v.Name, i+1, len(line))
			}
		}
		for _, line := range lines[1 : len(lines)-1] {
			var e struct {
				Entry string   `json:"entry"`
				Index uint64   `json:"index"`
				Proof []string `json:"proof"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("vector %q: %v", v.Name, err)
			}
			entry, err := base64.StdEncoding.DecodeString(e.Entry)
			if err != nil {
				t.Fatalf("vector %q: %v", v.Name, err)
			}
			var got []byte
			if h.Proof == bundle.ProofInclusion {
				var proof [][32]byte
				for _, s := range e.Proof {
					raw, err := base64.StdEncoding.DecodeString(s)
					if err != nil || len(raw) != 32 {
						t.Fatalf("vector %q: proof hash %q", v.Name, s)
					}
					proof = append(proof, [32]byte(raw))
				}
				got = bundle.AppendInclusionLine(nil, e.Index, entry, nil, proof)
			} else {
				got = bundle.AppendRangeLine(nil, e.Index, entry, nil)
			}
			if string(got) != line+"\n" {
				t.Errorf("vector %q: the format's encoder writes\n%s\nnot\n%s", v.Name, got, line)
			}
		}
		last := lines[len(lines)-1]
		var tr bundle.Trailer
		if err := json.Unmarshal([]byte(last), &tr); err != nil || canonical(tr) != last || !strings.HasPrefix(last, bundle.TrailerPrefix) {
			t.Errorf("vector %q: trailer %s does not read back through bundle.Trailer (%v)", v.Name, last, err)
		}
	}
}
