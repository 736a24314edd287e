package verifier

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/annal-dev/annal/format/bundle"
)

func verifyBytes(b []byte, p *Policy) (*BundleResult, error) {
	return VerifyBundle(bytes.NewReader(b), p, nil)
}

func TestVerifyBundle_RangeOfEverySize(t *testing.T) {
	l := newTestLog(t, testOrigin, 13)
	p := policyFor(t, l, "none")
	for from := uint64(0); from < 13; from++ {
		for to := from + 1; to <= 13; to++ {
			res, err := verifyBytes(l.bundle(bundleSpec{proof: bundle.ProofRange, from: from, to: to}), p)
			if err != nil {
				t.Fatalf("[%d, %d): %v", from, to, err)
			}
			if res.Events != to-from || res.FirstIndex != from || res.LastIndex != to-1 || res.ByActor["root"] != to-from {
				t.Fatalf("[%d, %d): result %+v", from, to, res)
			}
		}
	}
}

func TestVerifyBundle_SelectiveDisclosure(t *testing.T) {
	l := newTestLog(t, testOrigin, 20)
	p := policyFor(t, l, "none")
	b := l.bundle(bundleSpec{proof: bundle.ProofInclusion, indices: []uint64{1, 7, 8, 19}, selection: bundle.Selection{Actor: "root"}})
	res, err := verifyBytes(b, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 4 || res.FirstIndex != 1 || res.LastIndex != 19 {
		t.Fatalf("result %+v", res)
	}
	for i, e := range l.entries {
		if i == 1 || i == 7 || i == 8 || i == 19 {
			continue
		}
		enc := bundle.AppendRangeLine(nil, uint64(i), e, nil)
		entryB64 := enc[len(eventLinePrefix) : bytes.IndexByte(enc[len(eventLinePrefix):], '"')+len(eventLinePrefix)]
		if bytes.Contains(b, entryB64) {
			t.Fatalf("the bundle carries entry %d, which was not selected", i)
		}
	}
}

func TestVerifyBundle_Quorum(t *testing.T) {
	l := newTestLog(t, testOrigin, 5)
	w1, w2, stranger := newWitness(t, "w1"), newWitness(t, "w2"), newWitness(t, "stranger")
	p := policyFor(t, l, "w1", w1, w2)
	spec := bundleSpec{proof: bundle.ProofRange, from: 1, to: 4}

	spec.checkpoint = l.cosigned(5, w2)
	_, err := verifyBytes(l.bundle(spec), p)
	if err == nil || !strings.Contains(err.Error(), "quorum") {
		t.Fatalf("a checkpoint without the quorum: %v", err)
	}
	spec.checkpoint = l.cosigned(5, w1, stranger)
	res, err := verifyBytes(l.bundle(spec), p)
	if err != nil {
		t.Fatalf("an extra unknown cosignature: %v", err)
	}
	if len(res.Cosigners) != 1 || res.Cosigners[0] != "w1" {
		t.Fatalf("cosigners %v", res.Cosigners)
	}
}

func TestVerifyBundle_Consistency(t *testing.T) {
	l := newTestLog(t, testOrigin, 11)
	p := policyFor(t, l, "none")
	b := l.bundle(bundleSpec{proof: bundle.ProofRange, from: 4, to: 9, oldSize: 6})
	old := l.checkpoint(6)
	res, err := VerifyBundle(bytes.NewReader(b), p, &BundleOptions{OldCheckpoint: old})
	if err != nil {
		t.Fatal(err)
	}
	if res.OldSize != 6 {
		t.Fatalf("old size %d", res.OldSize)
	}
	l2 := newTestLog(t, testOrigin, 0) // another history under another key
	l2.skey = l.skey
	for i := range 6 {
		l2.append(actionEntry(100 + i))
	}
	if _, err := VerifyBundle(bytes.NewReader(b), p, &BundleOptions{OldCheckpoint: l2.checkpoint(6)}); err == nil {
		t.Fatal("a bundle consistent with another old root passed")
	}
	if _, err := VerifyBundle(bytes.NewReader(l.bundle(bundleSpec{proof: bundle.ProofRange, from: 4, to: 9})), p, &BundleOptions{OldCheckpoint: old}); err == nil {
		t.Fatal("a bundle without a consistency proof passed with an old checkpoint")
	}
}

func TestVerifyBundle_DeltaChains(t *testing.T) {
	l := newTestLog(t, testOrigin, 3)
	parent := ZeroDeltaHash
	var hashes []string
	for i := range 4 {
		e, h := deltaEntry(t, i, "s-1", parent)
		l.append(e)
		l.append(actionEntry(50 + i))
		parent = h
		hashes = append(hashes, h)
	}
	p := policyFor(t, l, "none")
	res, err := verifyBytes(l.bundle(bundleSpec{proof: bundle.ProofRange, from: 0, to: uint64(len(l.entries))}), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sessions) != 1 || !res.Sessions[0].Complete || res.Sessions[0].Deltas != 4 || res.Sessions[0].Head != hashes[3] {
		t.Fatalf("sessions %+v", res.Sessions)
	}
	// Mid-chain: from the second delta on (index 5).
	res, err = verifyBytes(l.bundle(bundleSpec{proof: bundle.ProofRange, from: 5, to: uint64(len(l.entries))}), p)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Sessions[0]; s.Complete || s.FirstParent != hashes[0] || s.Deltas != 3 {
		t.Fatalf("mid-chain session %+v", s)
	}
	// A session's deltas with one left out do not link.
	_, err = verifyBytes(l.bundle(bundleSpec{proof: bundle.ProofInclusion, indices: []uint64{3, 7, 9}}), p)
	var verr *Error
	if !errors.As(err, &verr) || verr.Check != CheckDelta || !strings.Contains(err.Error(), "is not the hash") {
		t.Fatalf("a gap in the chain: %v", err)
	}
}

func TestVerifyBundle_Refuses(t *testing.T) {
	l := newTestLog(t, testOrigin, 9)
	p := policyFor(t, l, "none")
	good := l.bundle(bundleSpec{proof: bundle.ProofRange, from: 2, to: 6})
	sparse := l.bundle(bundleSpec{proof: bundle.ProofInclusion, indices: []uint64{1, 4}})
	lines := bytes.SplitAfter(good, []byte("\n"))
	sparseLines := bytes.SplitAfter(sparse, []byte("\n"))
	other := newTestLog(t, testOrigin, 9)
	for _, c := range []struct {
		name   string
		bundle []byte
		check  Check
		want   string
	}{
		{"empty", nil, CheckBundle, "empty"},
		{"truncated after an event", bytes.Join(lines[:3], nil), CheckBundle, "truncated"},
		{"truncated mid-line", good[:len(good)-3], CheckBundle, "truncated"},
		{"no trailer", bytes.Join(lines[:len(lines)-2], nil), CheckBundle, "truncated"},
		{"a line after the trailer", append(bytes.Clone(good), lines[1]...), CheckBundle, "after the trailer"},
		{"duplicate index", replaceLine(good, 3, lines[1]), CheckBundle, "is not 3"},
		{"out of order", replaceLine(replaceLine(good, 2, lines[2]), 3, lines[1]), CheckBundle, "is not 2"},
		{"sparse out of order", bytes.Join([][]byte{sparseLines[0], sparseLines[2], sparseLines[1], sparseLines[3]}, nil), CheckBundle, "not above the previous"},
		{"sparse duplicate", bytes.Join([][]byte{sparseLines[0], sparseLines[1], sparseLines[1], sparseLines[3]}, nil), CheckBundle, "not above the previous"},
		{"unknown header member", bytes.Replace(good, []byte(`{"bundle"`), []byte(`{"a":1,"bundle"`), 1), CheckBundle, "unknown field"},
		{"duplicate header member", bytes.Replace(good, []byte(`"proof":"range"`), []byte(`"proof":"range","proof":"range"`), 1), CheckBundle, "twice"},
		{"header member in capitals", bytes.Replace(good, []byte(`"proof":"range"`), []byte(`"Proof":"range"`), 1), CheckBundle, "canonical"},
		{"header with white space", bytes.Replace(good, []byte(`"proof":"range"`), []byte(`"proof": "range"`), 1), CheckBundle, "canonical"},
		{"other format", bytes.Replace(good, []byte(`audit-bundle/v1","checkpoint`), []byte(`audit-bundle/v2","checkpoint`), 1), CheckBundle, "is not"},
		{"unknown event member", bytes.Replace(good, []byte(`,"index":3}`), []byte(`,"index":3,"x":1}`), 1), CheckBundle, "should end"},
		{"index with leading zero", bytes.Replace(good, []byte(`,"index":3}`), []byte(`,"index":03}`), 1), CheckBundle, "index"},
		{"non-canonical base64", bytes.Replace(good, []byte(`"entry":"eyJ`), []byte(`"entry":"eyJ\n`), 1), CheckBundle, ""},
		{"base64 with non-zero padding bits", replaceLine(good, 2, []byte(`{"entry":"eB==","index":2}`+"\n")), CheckBundle, "not canonical base64"},
		{"trailer miscounts", bytes.Replace(good, []byte(`"events":4`), []byte(`"events":5`), 1), CheckBundle, "counts 5"},
		{"other log's entry", replaceLine(good, 3, bundle.AppendRangeLine(nil, 3, actionEntry(77), nil)), CheckInclusion, "lead to root"},
		{"index beyond the checkpoint", replaceLine(sparse, 3, bundle.AppendInclusionLine(nil, 9, l.entries[4], nil, nil)), CheckIndex, "not inside"},
		{"sparse proof of another entry", replaceLine(sparse, 3, bundle.AppendInclusionLine(nil, 4, l.entries[5], nil, nil)), CheckInclusion, "not at index 4"},
		{"other checkpoint", l.bundle(bundleSpec{proof: bundle.ProofRange, from: 2, to: 6, checkpoint: other.checkpoint(9)}), CheckCheckpoint, ""},
		{"a line too long", append(append(bytes.Clone(lines[0]), bytes.Repeat([]byte("x"), bundle.MaxLineSize+1)...), '\n'), CheckBundle, "longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := verifyBytes(c.bundle, p)
			var verr *Error
			if !errors.As(err, &verr) {
				t.Fatalf("error %v is not a *verifier.Error", err)
			}
			if verr.Check != c.check || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want check %q mentioning %q", err, c.check, c.want)
			}
		})
	}
}

// TestVerifyBundle_EverySingleByteFlipFails flips the low bit of every byte
// of a range and of a sparse bundle (and two more bits of every 11th byte):
// verification must fail with a *Error, never panic, never pass. Under
// -short, every third byte.
func TestVerifyBundle_EverySingleByteFlipFails(t *testing.T) {
	l := newTestLog(t, testOrigin, 6)
	parent := ZeroDeltaHash
	for i := range 2 {
		e, h := deltaEntry(t, i, "s-1", parent)
		l.append(e)
		parent = h
	}
	w := newWitness(t, "w1")
	p := policyFor(t, l, "w1", w)
	size := uint64(len(l.entries))
	for _, spec := range []bundleSpec{
		{proof: bundle.ProofRange, from: 1, to: size, checkpoint: l.cosigned(size, w), oldSize: 3},
		{proof: bundle.ProofInclusion, indices: []uint64{0, 4, 6, 7}, checkpoint: l.cosigned(size, w)},
	} {
		good := l.bundle(spec)
		if _, err := verifyBytes(good, p); err != nil {
			t.Fatalf("%s bundle: %v", spec.proof, err)
		}
		for i := range good {
			values := []byte{0x01}
			if i%11 == 0 {
				values = append(values, 0x20, 0x80)
			}
			if testing.Short() && i%3 != 0 {
				continue
			}
			// Under the race detector every fourth byte (and every
			// eleventh); .ci/run flips every byte without it.
			if raceEnabled && i%4 != 0 && i%11 != 0 {
				continue
			}
			for _, x := range values {
				bad := bytes.Clone(good)
				bad[i] ^= x
				_, err := verifyBytes(bad, p)
				var verr *Error
				if !errors.As(err, &verr) {
					t.Fatalf("%s bundle, byte %d ^ %#x (%q): error %v is not a *verifier.Error", spec.proof, i, x, good[max(0, i-20):min(len(good), i+20)], err)
				}
			}
		}
	}
}
