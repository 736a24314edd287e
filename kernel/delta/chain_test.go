package delta

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// verifyChain is the check of a whole chain (§14.4) that StateAt and
// Rollback make before they answer.
func verifyChain(deltas []Delta) error {
	_, _, err := replay(deltas, "")
	return err
}

var (
	hashA = "sha256:" + strings.Repeat("a", 64)
	hashB = "sha256:" + strings.Repeat("b", 64)
	hashC = "sha256:" + strings.Repeat("c", 64)
)

// kat returns the known-answer chain: three deltas with fixed ids and
// times, unsealed.
func kat() []Delta {
	return []Delta{
		{DeltaID: "00000000-0000-4000-8000-000000000001", TurnID: "turn-1", SessionID: "sess-1", AgentDID: "agent-a",
			Timestamp: "2026-01-02T03:04:05Z", Changes: []Change{{"a.txt", OpCreate, hashA}, {"dir/b.txt", OpCreate, hashB}}},
		{DeltaID: "00000000-0000-4000-8000-000000000002", TurnID: "turn-2", SessionID: "sess-1", AgentDID: "agent-a",
			Timestamp: "2026-01-02T03:04:06.5Z", Changes: []Change{{"a.txt", OpModify, hashC}}},
		{DeltaID: "00000000-0000-4000-8000-000000000003", TurnID: "turn-3", SessionID: "sess-1", AgentDID: "agent-b",
			Timestamp: "2026-01-02T03:04:07Z", Changes: []Change{{"dir/b.txt", OpDelete, ""}, {"é/ü.md", OpCreate, hashA}}},
	}
}

// sealChain sets each delta's parent_hash to the hash before it and seals
// it.
func sealChain(t testing.TB, ds []Delta) []Delta {
	t.Helper()
	parent := ZeroHash
	for i := range ds {
		ds[i].ParentHash = parent
		if err := ds[i].Seal(); err != nil {
			t.Fatalf("Seal delta %d: %v", i+1, err)
		}
		parent = ds[i].DeltaHash
	}
	return ds
}

// TestADR0023_KnownAnswer checks the hashes of kat() against canonical JSON
// written out by hand and SHA-256 taken here, and against the hex values
// computed once outside Go (Python's hashlib).
func TestADR0023_KnownAnswer(t *testing.T) {
	canonical := []string{
		`{"agent_did":"agent-a","changes":[{"content_hash":"` + hashA + `","operation":"create","path":"a.txt"},{"content_hash":"` + hashB + `","operation":"create","path":"dir/b.txt"}],"delta_id":"00000000-0000-4000-8000-000000000001","parent_hash":"%s","session_id":"sess-1","timestamp":"2026-01-02T03:04:05Z","turn_id":"turn-1"}`,
		`{"agent_did":"agent-a","changes":[{"content_hash":"` + hashC + `","operation":"modify","path":"a.txt"}],"delta_id":"00000000-0000-4000-8000-000000000002","parent_hash":"%s","session_id":"sess-1","timestamp":"2026-01-02T03:04:06.5Z","turn_id":"turn-2"}`,
		`{"agent_did":"agent-b","changes":[{"operation":"delete","path":"dir/b.txt"},{"content_hash":"` + hashA + `","operation":"create","path":"é/ü.md"}],"delta_id":"00000000-0000-4000-8000-000000000003","parent_hash":"%s","session_id":"sess-1","timestamp":"2026-01-02T03:04:07Z","turn_id":"turn-3"}`,
	}
	known := []string{
		"5139783ad2ec2a9d39a78241737049927853301a221231c01a7fb3724991f140",
		"1bd5c274a5004cc6655cd67ca897117f40d1b90cf1e2a2a083c41f60a4527647",
		"2c7c2307d9a167e64fad4894a37cf864c0c8edf0149851ded1d64ccb56b31926",
	}
	ds := sealChain(t, kat())
	parent := ZeroHash
	for i, d := range ds {
		raw, _ := hex.DecodeString(parent)
		sum := sha256.Sum256(append(raw, fmt.Sprintf(canonical[i], parent)...))
		want := hex.EncodeToString(sum[:])
		if want != known[i] {
			t.Fatalf("delta %d: the hand-written canonical JSON hashes to %s, not the known %s", i+1, want, known[i])
		}
		if d.ParentHash != parent || d.DeltaHash != want {
			t.Errorf("delta %d: parent %s, hash %s; want parent %s, hash %s", i+1, d.ParentHash, d.DeltaHash, parent, want)
		}
		parent = want
	}
	if err := verifyChain(ds); err != nil {
		t.Fatalf("verifyChain(known answer): %v", err)
	}
}

func TestSpec14_4_ChainVerification(t *testing.T) {
	good := func() []Delta { return sealChain(t, kat()) }
	for _, tc := range []struct {
		name string
		make func() []Delta
		pos  int    // position named in the error; 0: valid
		why  string // part of the error
	}{
		{"valid", good, 0, ""},
		{"empty", func() []Delta { return nil }, 0, ""},
		{"one delta", func() []Delta { return good()[:1] }, 0, ""},
		{"first parent not zero", func() []Delta { return good()[1:] }, 1, "not ZeroHash"},
		{"missing middle", func() []Delta { d := good(); return []Delta{d[0], d[2]} }, 2, "is not the delta_hash of position 1"},
		{"swapped", func() []Delta { d := good(); return []Delta{d[0], d[2], d[1]} }, 2, "is not the delta_hash of position 1"},
		{"repeated", func() []Delta { d := good(); return []Delta{d[0], d[1], d[1]} }, 3, "parent_hash"},
		{"bad hash", func() []Delta { d := good(); d[2].DeltaHash = strings.Repeat("0", 64); return d }, 3, "not the hash of its fields"},
		{"no hash", func() []Delta { d := good(); d[0].DeltaHash = ""; return d }, 1, "not the hash of its fields"},
		{"other session", func() []Delta {
			d := kat()
			d[1].SessionID = "sess-2"
			return sealChain(t, d)
		}, 2, `session_id "sess-2" is not the chain's session "sess-1"`},
		{"turn twice", func() []Delta {
			d := kat()
			d[2].TurnID = "turn-1"
			return sealChain(t, d)
		}, 3, `turn_id "turn-1" appears twice`},
		{"delta id twice", func() []Delta {
			d := kat()
			d[2].DeltaID = d[0].DeltaID
			return sealChain(t, d)
		}, 3, "delta_id appears twice"},
		{"modify of a missing file", func() []Delta {
			d := kat()
			d[1].Changes[0].Path = "nope.txt"
			return sealChain(t, d)
		}, 2, `modify of "nope.txt", which does not exist`},
		{"create of an existing file", func() []Delta {
			d := kat()
			d[2].Changes[1].Path = "a.txt"
			return sealChain(t, d)
		}, 3, `create of "a.txt", which already exists`},
		{"delete of a missing file", func() []Delta {
			d := kat()
			d[2].Changes[0].Path = "dir/c.txt"
			return sealChain(t, d)
		}, 3, `delete of "dir/c.txt", which does not exist`},
		{"invalid field", func() []Delta {
			d := kat()
			d[1].Timestamp = "2026-01-02 03:04:06"
			d = sealChain(t, d[:1])
			bad := kat()[1]
			bad.Timestamp = "2026-01-02 03:04:06"
			bad.ParentHash = d[0].DeltaHash
			return append(d, bad)
		}, 2, "timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := tc.make()
			err := verifyChain(ds)
			if tc.pos == 0 {
				if err != nil {
					t.Fatalf("verifyChain: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("verifyChain accepted a broken chain")
			}
			id := ds[tc.pos-1].DeltaID
			if !errors.Is(err, ErrBrokenChain) || !strings.Contains(err.Error(), fmt.Sprintf("position %d (delta %s)", tc.pos, id)) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("verifyChain = %v; want ErrBrokenChain at position %d (delta %s) about %q", err, tc.pos, id, tc.why)
			}
		})
	}
}

// TestSpec14_5_TamperDetection flips one field of the middle delta of a
// five-delta chain. The chain up to the delta before it still verifies;
// every chain that includes it fails, at the middle delta. If the tamperer
// also reseals the middle delta, the next delta's link fails instead. No
// check skips the bad delta to look past it.
func TestSpec14_5_TamperDetection(t *testing.T) {
	build := func() []Delta {
		var ds []Delta
		for i := 1; i <= 5; i++ {
			ch := Change{"f.txt", OpModify, fmt.Sprintf("sha256:%064x", i)}
			if i == 1 {
				ch.Operation = OpCreate
			}
			ds = append(ds, Delta{DeltaID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), TurnID: fmt.Sprintf("t%d", i),
				SessionID: "s", AgentDID: "agent-a", Timestamp: fmt.Sprintf("2026-01-02T03:04:0%dZ", i), Changes: []Change{ch}})
		}
		return sealChain(t, ds)
	}
	const mid = 2 // index of the middle delta
	for _, tc := range []struct {
		field  string
		tamper func(d *Delta)
	}{
		{"delta_id", func(d *Delta) { d.DeltaID = "00000000-0000-4000-8000-999999999999" }},
		{"turn_id", func(d *Delta) { d.TurnID = "t9" }},
		{"session_id", func(d *Delta) { d.SessionID = "s2" }},
		{"agent_did", func(d *Delta) { d.AgentDID = "agent-b" }},
		{"timestamp", func(d *Delta) { d.Timestamp = "2026-01-02T03:04:09Z" }},
		{"changes.content_hash", func(d *Delta) { d.Changes[0].ContentHash = hashA }},
		{"changes.path", func(d *Delta) { d.Changes[0].Path = "g.txt" }},
		{"changes appended", func(d *Delta) { d.Changes = append(d.Changes, Change{"h.txt", OpCreate, hashA}) }},
		{"parent_hash", func(d *Delta) { d.ParentHash = strings.Repeat("1", 64) }},
		{"delta_hash", func(d *Delta) { d.DeltaHash = strings.Repeat("2", 64) }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			ds := build()
			tc.tamper(&ds[mid])
			for k := 1; k <= len(ds); k++ {
				err := verifyChain(ds[:k])
				if k <= mid {
					if err != nil {
						t.Fatalf("verifyChain of the first %d deltas (before the tampered one): %v", k, err)
					}
					continue
				}
				if err == nil || !errors.Is(err, ErrBrokenChain) || !strings.Contains(err.Error(), fmt.Sprintf("position %d ", mid+1)) {
					t.Fatalf("verifyChain of the first %d deltas = %v; want the failure at position %d", k, err, mid+1)
				}
			}
			// Resealed: the tampered delta is whole again, so the break is
			// the next delta's parent link (or the tampered parent link).
			if tc.field == "delta_hash" {
				return // resealing would undo this tampering
			}
			ds[mid].DeltaHash = ""
			if ds[mid].Seal() != nil {
				return // the tampered field is itself invalid; covered above
			}
			err := verifyChain(ds)
			if err == nil || !errors.Is(err, ErrBrokenChain) {
				t.Fatalf("resealed: verifyChain = %v, want a break", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("position %d ", mid+2)) && !strings.Contains(err.Error(), fmt.Sprintf("position %d ", mid+1)) {
				t.Fatalf("resealed: %v, want the break at position %d or %d", err, mid+1, mid+2)
			}
		})
	}
}

func TestADR0023_ChainAppend(t *testing.T) {
	ds := sealChain(t, kat())
	c := NewChain("sess-1")
	if c.Head() != ZeroHash || len(c.deltas) != 0 || len(c.Files()) != 0 {
		t.Fatalf("empty chain: head %s, %d deltas", c.Head(), len(c.deltas))
	}
	for i, d := range ds {
		if err := c.Append(d); err != nil {
			t.Fatalf("Append %d: %v", i+1, err)
		}
		if c.Head() != d.DeltaHash || len(c.deltas) != i+1 {
			t.Fatalf("after %d: head %s, %d deltas", i+1, c.Head(), len(c.deltas))
		}
	}
	if !reflect.DeepEqual(c.deltas, ds) {
		t.Fatal("the chain holds other deltas than were appended")
	}
	// The chain keeps its own copies.
	ds[0].Changes[0].Path = "changed"
	c.Files()["x"] = hashA
	if c.deltas[0].Changes[0].Path != "a.txt" || len(c.Files()) != 2 {
		t.Fatal("the chain shares memory with its caller")
	}
	if err := verifyChain(c.deltas); err != nil {
		t.Fatal(err)
	}
}

// TestADR0023_AppendRefusalChangesNothing: every refused Append leaves the
// chain's head, deltas and files as they were.
func TestADR0023_AppendRefusalChangesNothing(t *testing.T) {
	ds := sealChain(t, kat())
	next := kat()[2]
	next.ParentHash = ds[1].DeltaHash
	for _, tc := range []struct {
		name string
		d    func() Delta
	}{
		{"replay of the head", func() Delta { return ds[1] }},
		{"wrong parent", func() Delta { d := next; d.ParentHash = ds[0].DeltaHash; _ = d.Seal(); return d }},
		{"unsealed", func() Delta { return next }},
		{"bad hash", func() Delta { d := next; _ = d.Seal(); d.DeltaHash = ds[0].DeltaHash; return d }},
		{"other session", func() Delta { d := next; d.SessionID = "sess-2"; _ = d.Seal(); return d }},
		{"turn twice", func() Delta { d := next; d.TurnID = "turn-2"; _ = d.Seal(); return d }},
		// The first change is fine; the second is not. Nothing is applied.
		{"second change inconsistent", func() Delta {
			d := next
			d.Changes = []Change{{"dir/b.txt", OpDelete, ""}, {"a.txt", OpCreate, hashA}}
			_ = d.Seal()
			return d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChain("sess-1")
			for _, d := range ds[:2] {
				if err := c.Append(d); err != nil {
					t.Fatal(err)
				}
			}
			head, files, deltas := c.Head(), c.Files(), slices.Clone(c.deltas)
			if err := c.Append(tc.d()); err == nil || !errors.Is(err, ErrBrokenChain) || !strings.Contains(err.Error(), "position 3 ") {
				t.Fatalf("Append = %v, want an ErrBrokenChain at position 3", err)
			}
			if c.Head() != head || !maps.Equal(c.Files(), files) || !reflect.DeepEqual(c.deltas, deltas) {
				t.Fatal("a refused Append changed the chain")
			}
			if err := c.Append(ds[2]); err != nil {
				t.Fatalf("the right delta after a refusal: %v", err)
			}
		})
	}
	var zero Chain
	if err := zero.Append(ds[0]); err == nil {
		t.Fatal("the zero Chain accepted a delta")
	}
}
