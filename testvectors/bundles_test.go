package testvectors

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/verifier"
)

const bundlesFile = "bundles.json"

// bundleVectors is one log of Entries under the key labelled "log",
// cosigned at CosignTime by the witnesses each vector names. Policy (the
// log, the witness "witness", quorum "witness") is computed; each vector's
// bundle is written by hand from FORMATS.md (RFC 6962 by hand, RFC 8785 by
// gowebpki/jcs) and MUST verify under it; each reject MUST be refused.
type bundleVectors struct {
	Description string         `json:"description"`
	Keys        []keyVector    `json:"keys"`
	Entries     []string       `json:"entries"`
	CosignTime  uint64         `json:"cosign_time"`
	Policy      string         `json:"policy"`
	Vectors     []bundleVector `json:"vectors"`
	Rejects     []bundleReject `json:"rejects"`
}

// bundleVector: a range bundle of [From, To), or an inclusion bundle of
// Indices with Selection; OldSize adds a consistency proof; Cosigners are
// the witness key labels that cosign the checkpoint of the whole log.
type bundleVector struct {
	Name      string          `json:"name"`
	Proof     string          `json:"proof"`
	From      uint64          `json:"from,omitempty"`
	To        uint64          `json:"to,omitempty"`
	Indices   []uint64        `json:"indices,omitempty"`
	Selection json.RawMessage `json:"selection,omitempty"`
	OldSize   uint64          `json:"old_size,omitempty"`
	Cosigners []string        `json:"cosigners"`
	Bundle    string          `json:"bundle"`
}

// bundleReject is the bundle of vector From (or, with Cosigners, of From
// rebuilt with those cosigners), changed: Old replaced by New; DropLine,
// DupLine (1-based) removed or repeated; SwapLines exchanged; EntryFrom
// {line, entry} puts another entry's base64 in a line; Indices rebuilds an
// inclusion bundle with other indices.
type bundleReject struct {
	Name      string   `json:"name"`
	Reason    string   `json:"reason"`
	From      string   `json:"from"`
	Cosigners []string `json:"cosigners,omitempty"`
	Old       string   `json:"old,omitempty"`
	New       string   `json:"new,omitempty"`
	DropLine  int      `json:"drop_line,omitempty"`
	DupLine   int      `json:"dup_line,omitempty"`
	SwapLines []int    `json:"swap_lines,omitempty"`
	EntryFrom []int    `json:"entry_from,omitempty"`
	Indices   []uint64 `json:"indices,omitempty"`
	Bundle    string   `json:"bundle"`
	GoError   string   `json:"go_error"`
}

func TestBundleVectors(t *testing.T) {
	var f bundleVectors
	load(t, bundlesFile, &f)
	keys := deriveKeys(t, bundlesFile, f.Keys)
	log := keys["log"]
	var leaves [][]byte
	for _, e := range f.Entries {
		h := sha256.Sum256(append([]byte{0}, e...))
		leaves = append(leaves, h[:])
	}
	expect(t, bundlesFile, "policy", "policy", &f.Policy,
		fmt.Sprintf("log %s\nwitness witness %s\nquorum witness\n", log.vkey, cosignerVKey(keys["witness"])))
	p, err := verifier.ParsePolicy([]byte(f.Policy))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*bundleVector{}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		byName[v.Name] = v
		expect(t, bundlesFile, v.Name, "bundle", &v.Bundle, writeBundle(t, &f, keys, leaves, v, v.Cosigners))
		res, err := verifier.VerifyBundle(strings.NewReader(v.Bundle), p, nil)
		if err != nil {
			t.Errorf("vector %q: refused: %v", v.Name, err)
			continue
		}
		if want := uint64(len(v.Indices)) + v.To - v.From; res.Events != want {
			t.Errorf("vector %q: %d events verified, want %d", v.Name, res.Events, want)
		}
	}
	for i := range f.Rejects {
		r := &f.Rejects[i]
		v := byName[r.From]
		if v == nil || r.Reason == "" {
			t.Fatalf("reject %q: bad inputs", r.Name)
		}
		b := v.Bundle
		switch {
		case r.Cosigners != nil:
			b = writeBundle(t, &f, keys, leaves, v, r.Cosigners)
		case r.Indices != nil:
			w := *v
			w.Indices = r.Indices
			b = writeBundle(t, &f, keys, leaves, &w, v.Cosigners)
		}
		b = changeBundle(t, r, b)
		expect(t, bundlesFile, r.Name, "bundle", &r.Bundle, b)
		_, err := verifier.VerifyBundle(strings.NewReader(r.Bundle), p, nil)
		if err == nil {
			t.Errorf("reject %q (%s): accepted", r.Name, r.Reason)
			continue
		}
		expect(t, bundlesFile, r.Name, "go_error", &r.GoError, err.Error())
	}
	save(t, bundlesFile, &f)
}

func changeBundle(t *testing.T, r *bundleReject, b string) string {
	t.Helper()
	if r.Old != "" {
		if !strings.Contains(b, r.Old) {
			t.Fatalf("reject %q: %q is not in the bundle", r.Name, r.Old)
		}
		b = strings.Replace(b, r.Old, r.New, 1)
	}
	lines := strings.SplitAfter(b, "\n")
	lines = lines[:len(lines)-1] // after the final LF
	switch {
	case r.DropLine > 0:
		lines = append(lines[:r.DropLine-1], lines[r.DropLine:]...)
	case r.DupLine > 0:
		lines = append(lines[:r.DupLine], lines[r.DupLine-1:]...)
	case len(r.SwapLines) == 2:
		a, c := r.SwapLines[0]-1, r.SwapLines[1]-1
		lines[a], lines[c] = lines[c], lines[a]
	case len(r.EntryFrom) == 2:
		var f bundleVectors
		load(t, bundlesFile, &f)
		line := lines[r.EntryFrom[0]-1]
		end := strings.Index(line, `","index"`)
		lines[r.EntryFrom[0]-1] = `{"entry":"` + base64.StdEncoding.EncodeToString([]byte(f.Entries[r.EntryFrom[1]])) + line[end:]
	}
	return strings.Join(lines, "")
}

// writeBundle writes a vector's bundle from FORMATS.md alone.
func writeBundle(t *testing.T, f *bundleVectors, keys map[string]*noteKey, leaves [][]byte, v *bundleVector, cosigners []string) string {
	t.Helper()
	size := uint64(len(leaves))
	text := string(checkpoints.Checkpoint{Origin: keys["log"].name, Size: size, Hash: [32]byte(mth(leaves))}.Marshal())
	cp := signByHand(text, keys["log"])
	for _, label := range cosigners {
		_, line := cosignByHand(text, keys[label], f.CosignTime)
		cp += line
	}
	h := map[string]any{"bundle": "annal.dev/audit-bundle/v1", "checkpoint": cp, "proof": v.Proof}
	indices := v.Indices
	switch v.Proof {
	case "range":
		h["selection"] = map[string]any{"from": v.From, "to": v.To}
		if l := compactByHand(0, v.From, leaves); len(l) > 0 {
			h["left"] = l
		}
		if r := compactByHand(v.To, size, leaves); len(r) > 0 {
			h["right"] = r
		}
		indices = nil
		for i := v.From; i < v.To; i++ {
			indices = append(indices, i)
		}
	default:
		h["selection"] = v.Selection
	}
	if v.OldSize > 0 {
		c := map[string]any{"old_size": v.OldSize, "old_root": base64.StdEncoding.EncodeToString(mth(leaves[:v.OldSize]))}
		if p := rfcConsistency(v.OldSize, leaves); len(p) > 0 {
			c["proof"] = b64s(p)
		}
		h["consistency"] = c
	}
	raw, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	header, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.Write(header)
	out.WriteByte('\n')
	for _, i := range indices {
		fmt.Fprintf(&out, `{"entry":"%s","index":%d`, base64.StdEncoding.EncodeToString([]byte(f.Entries[i])), i)
		if v.Proof == "inclusion" {
			out.WriteString(`,"proof":[`)
			for j, h := range b64s(rfcPath(i, leaves)) {
				if j > 0 {
					out.WriteByte(',')
				}
				fmt.Fprintf(&out, "%q", h)
			}
			out.WriteByte(']')
		}
		out.WriteString("}\n")
	}
	fmt.Fprintf(&out, `{"end":"annal.dev/audit-bundle/v1","events":%d}`+"\n", len(indices))
	return out.String()
}

// compactByHand is the compact range of [begin, end): from the left, the
// largest subtree that starts at begin (aligned to its size) and fits.
func compactByHand(begin, end uint64, leaves [][]byte) []string {
	var out [][]byte
	for begin < end {
		size := uint64(1)
		for begin%(2*size) == 0 && begin+2*size <= end {
			size *= 2
		}
		out = append(out, mth(leaves[begin:begin+size]))
		begin += size
	}
	return b64s(out)
}

func b64s(hashes [][]byte) []string {
	out := make([]string, len(hashes))
	for i, h := range hashes {
		out[i] = base64.StdEncoding.EncodeToString(h)
	}
	return out
}
