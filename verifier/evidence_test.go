package verifier

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/annal-dev/annal/format/evidence"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

// fork returns a log that shares the first shared entries of l and then
// holds other entries, signed with l's key.
func fork(l *testLog, shared, total int) *testLog {
	f := &testLog{t: l.t, tree: testonly.New(rfc6962.DefaultHasher), skey: l.skey, vkey: l.vkey}
	for i := range total {
		if i < shared {
			f.append(l.entries[i])
		} else {
			f.append(actionEntry(1000 + i))
		}
	}
	return f
}

func evidenceJSON(t testing.TB, ev evidence.File) []byte {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// splitEvidence: the honest log at small, a fork at large, with the fork's
// prefix root and proof.
func splitEvidence(t testing.TB, honest, forked *testLog, small, large uint64) evidence.File {
	ev := evidence.File{Format: evidence.Format, Origin: testOrigin, LogKey: honest.vkey,
		Checkpoints: [2]string{string(honest.checkpoint(small)), string(forked.checkpoint(large))},
		PrefixRoot:  b64(forked.tree.HashAt(small))}
	hashes, err := forked.tree.ConsistencyProof(small, large)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hashes {
		ev.ConsistencyProof = append(ev.ConsistencyProof, b64(h))
	}
	return ev
}

func TestVerifyEvidence_Holds(t *testing.T) {
	l := newTestLog(t, testOrigin, 12)
	f := fork(l, 2, 12)
	same := evidence.File{Format: evidence.Format, Origin: testOrigin, LogKey: l.vkey,
		Checkpoints: [2]string{string(l.checkpoint(7)), string(f.checkpoint(7))}}
	for _, tc := range []struct {
		name string
		ev   evidence.File
	}{
		{"same size, two roots", same},
		{"sizes 5 and 9", splitEvidence(t, l, f, 5, 9)},
		{"smaller size a power of two", splitEvidence(t, l, f, 4, 12)},
		{"fork at the last entry", splitEvidence(t, l, fork(l, 4, 12), 5, 12)},
		{"honest larger, forked smaller", splitEvidence(t, f, l, 6, 11)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := VerifyEvidence(evidenceJSON(t, tc.ev), l.vkey)
			if err != nil {
				t.Fatal(err)
			}
			if res.Roots[0] == res.Roots[1] && res.Sizes[0] == res.Sizes[1] {
				t.Fatalf("result %+v", res)
			}
			// Without a trusted key, the file's key is used.
			if _, err := VerifyEvidence(evidenceJSON(t, tc.ev), ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestVerifyEvidence_Refuses(t *testing.T) {
	l := newTestLog(t, testOrigin, 12)
	f := fork(l, 2, 12)
	other := newTestLog(t, "example.com/annal/other", 12)
	good := splitEvidence(t, l, f, 5, 9)
	mutate := func(m func(*evidence.File)) []byte {
		ev := good
		ev.ConsistencyProof = append([]string(nil), good.ConsistencyProof...)
		m(&ev)
		return evidenceJSON(t, ev)
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		key   string
		check Check
		want  string
	}{
		{"honest extension", evidenceJSON(t, splitEvidence(t, l, l, 5, 9)), l.vkey, CheckEvidence, "consistent"},
		{"same checkpoint twice", evidenceJSON(t, evidence.File{Format: evidence.Format, Origin: testOrigin, LogKey: l.vkey,
			Checkpoints: [2]string{string(l.checkpoint(7)), string(l.checkpoint(7))}}), l.vkey, CheckEvidence, "same root"},
		{"another trusted key", mutate(func(*evidence.File) {}), other.vkey, CheckKey, "not the trusted key"},
		{"checkpoint by another log", mutate(func(e *evidence.File) { e.Checkpoints[1] = string(other.checkpoint(9)) }), "", CheckCheckpoint, "checkpoint 2"},
		{"out of order", mutate(func(e *evidence.File) { e.Checkpoints[0], e.Checkpoints[1] = e.Checkpoints[1], e.Checkpoints[0] }), "", CheckEvidence, "not in order"},
		{"proof hash changed", mutate(func(e *evidence.File) { e.ConsistencyProof[0] = b64(make([]byte, 32)) }), "", CheckConsistency, ""},
		{"proof cut short", mutate(func(e *evidence.File) { e.ConsistencyProof = e.ConsistencyProof[1:] }), "", CheckConsistency, ""},
		{"prefix root is the smaller root", mutate(func(e *evidence.File) { e.PrefixRoot = b64(l.tree.HashAt(5)) }), "", CheckConsistency, ""},
		{"no prefix root", mutate(func(e *evidence.File) { e.PrefixRoot = "" }), "", CheckFormat, "prefix_root"},
		{"wrong format", mutate(func(e *evidence.File) { e.Format = "v0" }), "", CheckFormat, "format"},
		{"origin not the key's", mutate(func(e *evidence.File) { e.Origin = "x" }), "", CheckKey, "does not name origin"},
		{"unknown member", []byte(strings.Replace(string(mutate(func(*evidence.File) {})), `"format"`, `"extra":1,"format"`, 1)), "", CheckFormat, "unknown field"},
		{"duplicate member", []byte(strings.Replace(string(mutate(func(*evidence.File) {})), `"format"`, `"origin":"x","format"`, 1)), "", CheckFormat, "twice"},
		{"member in capitals", []byte(strings.Replace(string(mutate(func(*evidence.File) {})), `"format"`, `"FORMAT"`, 1)), "", CheckFormat, "case-sensitive"},
		{"observation member in capitals", []byte(strings.Replace(string(mutate(func(e *evidence.File) {
			e.Observations = []evidence.Observation{{Checkpoint: 1, By: "w", At: "2026-11-22T10:00:00Z"}}
		})), `"by"`, `"By"`, 1)), "", CheckFormat, "case-sensitive"},
		{"line break in a proof hash", []byte(strings.Replace(string(mutate(func(*evidence.File) {})), `"consistency_proof":["`, `"consistency_proof":["\n`, 1)), "", CheckFormat, "line break"},
		{"not JSON", []byte("evidence"), "", CheckFormat, "not valid"},
		{"trailing data", append(mutate(func(*evidence.File) {}), []byte(" {}")...), "", CheckFormat, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyEvidence(tc.data, tc.key)
			var verr *Error
			if !errors.As(err, &verr) || verr.Check != tc.check || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want check %q mentioning %q", err, tc.check, tc.want)
			}
		})
	}
}

func FuzzVerifyEvidence(f *testing.F) {
	l := newTestLog(f, testOrigin, 9)
	fk := fork(l, 2, 9)
	f.Add(evidenceJSON(f, splitEvidence(f, l, fk, 5, 9)))
	f.Add(evidenceJSON(f, evidence.File{Format: evidence.Format, Origin: testOrigin, LogKey: l.vkey,
		Checkpoints: [2]string{string(l.checkpoint(7)), string(fk.checkpoint(7))}}))
	f.Add([]byte(`{"format":"annal.dev/equivocation-evidence/v1"}`))
	f.Add([]byte(`[[[[[[[[[[[]]]]]]]]]]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := VerifyEvidence(data, l.vkey)
		if err != nil {
			var verr *Error
			if !errors.As(err, &verr) {
				t.Fatalf("error %v is not a *verifier.Error", err)
			}
			return
		}
		if res.Sizes[0] == res.Sizes[1] && res.Roots[0] == res.Roots[1] {
			t.Fatalf("accepted evidence of nothing: %+v", res)
		}
	})
}
