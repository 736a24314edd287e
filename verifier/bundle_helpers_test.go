package verifier

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/annal-dev/annal/format/bundle"
	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/compact"
)

// bundleSpec says what testBundle writes; tests change the result to make
// it wrong.
type bundleSpec struct {
	proof      string // bundle.ProofRange or bundle.ProofInclusion
	from, to   uint64 // range bundles: the events [from, to)
	indices    []uint64
	selection  bundle.Selection
	checkpoint []byte // default: the log's plain checkpoint at its size
	oldSize    uint64 // with a consistency proof from this size
}

// testBundle writes a bundle of the test log with the format's event line
// encoder, RFC 8785 by gowebpki/jcs, and the merkle module's reference tree.
func (l *testLog) bundle(spec bundleSpec) []byte {
	l.t.Helper()
	size := uint64(len(l.entries))
	h := bundle.Header{Bundle: bundle.Format, Proof: spec.proof, Selection: spec.selection}
	h.Checkpoint = string(spec.checkpoint)
	if spec.checkpoint == nil {
		h.Checkpoint = string(l.checkpoint(size))
	}
	indices := spec.indices
	if spec.proof == bundle.ProofRange {
		from, to := spec.from, spec.to
		h.Selection.From, h.Selection.To = &from, &to
		h.Left = rangeHashes(l, 0, from)
		h.Right = rangeHashes(l, to, size)
		indices = nil
		for i := from; i < to; i++ {
			indices = append(indices, i)
		}
	}
	if spec.oldSize > 0 {
		hashes, err := l.tree.ConsistencyProof(spec.oldSize, size)
		if err != nil {
			l.t.Fatal(err)
		}
		c := &bundle.Consistency{OldSize: spec.oldSize, OldRoot: b64(l.tree.HashAt(spec.oldSize))}
		for _, x := range hashes {
			c.Proof = append(c.Proof, b64(x))
		}
		h.Consistency = c
	}
	var out []byte
	out = append(out, canonicalLine(l.t, h)...)
	for _, i := range indices {
		if spec.proof != bundle.ProofInclusion {
			out = bundle.AppendRangeLine(out, i, l.entries[i], nil)
			continue
		}
		hashes, err := l.tree.InclusionProof(i, size)
		if err != nil {
			l.t.Fatal(err)
		}
		var p [][32]byte
		for _, x := range hashes {
			p = append(p, [32]byte(x))
		}
		out = bundle.AppendInclusionLine(out, i, l.entries[i], nil, p)
	}
	out = append(out, canonicalLine(l.t, bundle.Trailer{End: bundle.Format, Events: uint64(len(indices))})...)
	return out
}

// rangeHashes is the compact range of [begin, end), built leaf by leaf.
func rangeHashes(l *testLog, begin, end uint64) []string {
	f := &compact.RangeFactory{Hash: hasher.HashChildren}
	r := f.NewEmptyRange(begin)
	for i := begin; i < end; i++ {
		if err := r.Append(l.tree.LeafHash(i), nil); err != nil {
			l.t.Fatal(err)
		}
	}
	var out []string
	for _, x := range r.Hashes() {
		out = append(out, b64(x))
	}
	return out
}

func canonicalLine(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	return append(c, '\n')
}

// policyFor is a policy naming the log and the witnesses, with quorum.
func policyFor(t testing.TB, l *testLog, quorum string, ws ...*testWitness) *Policy {
	t.Helper()
	text := fmt.Sprintf("log %s\n", l.vkey)
	for _, w := range ws {
		text += fmt.Sprintf("witness %s %s\n", w.name, w.vkey)
	}
	text += "quorum " + quorum + "\n"
	p, err := ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// replaceLine swaps line n (1-based) of a bundle.
func replaceLine(b []byte, n int, line []byte) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[n-1] = line
	return bytes.Join(lines, nil)
}

// deltaEntry is a canonical session.delta event; parent is the previous
// delta's hash. It returns the entry and the delta's hash.
func deltaEntry(t testing.TB, i int, session, parent string) ([]byte, string) {
	t.Helper()
	ts := fmt.Sprintf("2026-11-22T11:00:%02dZ", i%60)
	d := map[string]any{
		"delta_id": fmt.Sprintf("019a5c3e-0000-7000-9000-%012x", i), "turn_id": fmt.Sprintf("turn-%d", i),
		"session_id": session, "agent_did": "agent-a", "timestamp": ts,
		"changes":     []any{map[string]any{"path": fmt.Sprintf("src/f%d.go", i), "operation": "modify", "content_hash": "sha256:" + fmt.Sprintf("%064x", i)}},
		"parent_hash": parent,
	}
	raw, _ := json.Marshal(d)
	h, err := DeltaHash(raw)
	if err != nil {
		t.Fatal(err)
	}
	d["delta_hash"] = h
	ev := map[string]any{"v": 1, "id": fmt.Sprintf("019a5c3e-0000-7000-8000-%012x", 1000+i), "time": ts,
		"kind": DeltaKind, "actor": "agent-a", "session": session, "delta": d}
	raw, _ = json.Marshal(ev)
	c, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	return c, h
}
