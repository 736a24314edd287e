package verifier

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/annal-dev/annal/format/bundle"
)

// FuzzVerifyBundle feeds arbitrary bundles to the verifier under a fixed
// policy. It must never panic, every failure must be a *Error, and a
// success must mean what it says: every event is the log's entry at its
// index.
func FuzzVerifyBundle(f *testing.F) {
	l := newTestLog(f, testOrigin, 5)
	parent := ZeroDeltaHash
	for i := range 2 {
		e, h := deltaEntry(f, i, "s-1", parent)
		l.append(e)
		parent = h
	}
	p := policyFor(f, l, "none")
	f.Add(l.bundle(bundleSpec{proof: bundle.ProofRange, from: 0, to: 7}))
	f.Add(l.bundle(bundleSpec{proof: bundle.ProofRange, from: 3, to: 6, oldSize: 2}))
	f.Add(l.bundle(bundleSpec{proof: bundle.ProofInclusion, indices: []uint64{1, 5, 6}, selection: bundle.Selection{Session: "s-1"}}))
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := VerifyBundle(bytes.NewReader(data), p, &BundleOptions{Workers: 2})
		if err != nil {
			var verr *Error
			if !errors.As(err, &verr) {
				t.Fatalf("error %v is not a *verifier.Error", err)
			}
			return
		}
		if res.Events == 0 || res.LastIndex >= uint64(len(l.entries)) {
			t.Fatalf("accepted %d events up to index %d", res.Events, res.LastIndex)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if e, _, err := parseEventLine(line, res.Proof == bundle.ProofInclusion, nil); err == nil && !bytes.Equal(e.entry, l.entries[e.index]) {
				t.Fatalf("accepted an entry that is not the log's at index %d", e.index)
			}
		}
	})
}

// FuzzParseEventLine: what parses re-encodes, with the format's encoder, to
// the same bytes (one spelling per line).
func FuzzParseEventLine(f *testing.F) {
	f.Add(eventLine(3, actionEntry(3), nil, false), false)
	f.Add(eventLine(0, []byte("x"), [][32]byte{{1}, {2}}, true), true)
	f.Add([]byte(`{"entry":"eA==","index":01}`), false)
	opening := &bundle.Opening{Payload: []byte(`{"a":1}`), Salt: bytes.Repeat([]byte{7}, 32)}
	f.Add(bundle.AppendRangeLine(nil, 4, actionEntry(4), opening), false)
	f.Add(bundle.AppendInclusionLine(nil, 4, actionEntry(4), opening, [][32]byte{{3}}), true)
	f.Add(bundle.AppendKeyEventLine(nil, 2, actionEntry(2), [][32]byte{{4}}), true)
	f.Fuzz(func(t *testing.T, line []byte, withProof bool) {
		e, _, err := parseEventLine(line, withProof, nil)
		if err != nil {
			return
		}
		var proof [][32]byte
		for _, h := range e.proof {
			proof = append(proof, [32]byte(h))
		}
		var again []byte
		switch {
		case e.keyEvent:
			again = bundle.AppendKeyEventLine(nil, e.index, e.entry, proof)
		case e.opened != nil && withProof:
			again = bundle.AppendInclusionLine(nil, e.index, e.entry, &bundle.Opening{Payload: e.opened.payload, Salt: e.opened.salt}, proof)
		case e.opened != nil:
			again = bundle.AppendRangeLine(nil, e.index, e.entry, &bundle.Opening{Payload: e.opened.payload, Salt: e.opened.salt})
		default:
			again = eventLine(e.index, e.entry, proof, withProof)
		}
		if !bytes.Equal(again[:len(again)-1], line) {
			t.Fatalf("line %q parses, but encodes back as %q", line, again)
		}
	})
}

// eventLine is the event line of either kind of bundle, LF included.
func eventLine(index uint64, entry []byte, proof [][32]byte, withProof bool) []byte {
	if withProof {
		return bundle.AppendInclusionLine(nil, index, entry, nil, proof)
	}
	return bundle.AppendRangeLine(nil, index, entry, nil)
}

// FuzzCheckDeltaEvent: a delta the checker accepts has a hash that
// recomputes; no input panics.
func FuzzCheckDeltaEvent(f *testing.F) {
	e0, h0 := deltaEntry(f, 0, "s-1", ZeroDeltaHash)
	e1, _ := deltaEntry(f, 1, "s-1", h0)
	f.Add(e0, e1)
	f.Add(e1, e0)
	// A plain delta, then one whose changes are sealed (retention).
	if raw, err := os.ReadFile("../testvectors/deltas.json"); err == nil {
		var v struct {
			Chain []struct {
				Entry string `json:"entry"`
			} `json:"chain"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			f.Fatal(err)
		}
		for i := 1; i < len(v.Chain); i++ {
			f.Add([]byte(v.Chain[i-1].Entry), []byte(v.Chain[i].Entry))
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		c, err := VerifyDeltaChain([][]byte{a, b}, false)
		if err != nil {
			var verr *Error
			if !errors.As(err, &verr) {
				t.Fatalf("error %v is not a *verifier.Error", err)
			}
			return
		}
		if c.Deltas != 2 {
			t.Fatalf("chain %+v", c)
		}
		ev, _ := ParseEvent(b)
		if h, err := DeltaHash(ev.delta); err != nil || h != c.Head {
			t.Fatalf("head %s, the last delta hashes to %s (%v)", c.Head, h, err)
		}
	})
}
