package testvectors

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
)

const deltasFile = "deltas.json"

// deltaVectors is one session's chain of deltas. Each link's delta (all
// members but parent_hash and delta_hash) and event id are inputs; the
// parent hash, the canonical bytes that are hashed, the delta hash and the
// session.delta event entry are computed.
type deltaVectors struct {
	Description string        `json:"description"`
	Chain       []deltaLink   `json:"chain"`
	Rejects     []deltaReject `json:"rejects"`
}

type deltaLink struct {
	EventID   string      `json:"event_id"`
	Delta     delta.Delta `json:"delta"`
	Canonical string      `json:"canonical"`
	DeltaHash string      `json:"delta_hash"`
	Entry     string      `json:"entry"`
}

// deltaReject: the chain's entries in Order (indices into chain), with the
// entry at Change changed from Old to New (and, when Reseal, its hash
// recomputed so that only the link is wrong), that a verifier MUST refuse
// as a complete chain.
type deltaReject struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	Order  []int  `json:"order"`
	Change *int   `json:"change,omitempty"`
	Old    string `json:"old,omitempty"`
	New    string `json:"new,omitempty"`
	Reseal bool   `json:"reseal,omitempty"`
	// Parent, if set, replaces parent_hash (then resealed).
	Parent  string `json:"parent,omitempty"`
	GoError string `json:"go_error"`
}

func TestDeltaVectors(t *testing.T) {
	var f deltaVectors
	load(t, deltasFile, &f)
	if len(f.Chain) < 3 {
		t.Fatal("the chain has fewer than 3 deltas")
	}
	parent := strings.Repeat("0", 64)
	var entries [][]byte
	var deltas []delta.Delta
	for i := range f.Chain {
		l := &f.Chain[i]
		d := l.Delta
		d.ParentHash, d.DeltaHash = parent, ""
		// By hand: SHA-256(raw parent || JCS(every member but delta_hash)).
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var members map[string]any
		json.Unmarshal(raw, &members)
		delete(members, "delta_hash")
		raw, _ = json.Marshal(members)
		canonical, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		parentRaw, _ := hex.DecodeString(parent)
		sum := sha256.Sum256(append(parentRaw, canonical...))
		hash := hex.EncodeToString(sum[:])
		expect(t, deltasFile, d.DeltaID, "canonical", &l.Canonical, string(canonical))
		expect(t, deltasFile, d.DeltaID, "delta_hash", &l.DeltaHash, hash)
		// kernel/delta agrees.
		if h, err := d.Hash(); err != nil || h != hash {
			t.Errorf("delta %s: kernel/delta hashes it to %s (%v), by hand %s", d.DeltaID, h, err, hash)
		}
		d.DeltaHash = hash
		if err := d.Validate(); err != nil {
			t.Errorf("delta %s: kernel/delta refuses it: %v", d.DeltaID, err)
		}
		l.Delta.ParentHash, l.Delta.DeltaHash = parent, hash
		entry, err := event.Encode(&event.Event{V: 1, ID: l.EventID, Time: mustInstant(t, d.Timestamp), Kind: event.KindSessionDelta,
			Actor: d.AgentDID, Session: d.SessionID, Delta: &d})
		if err != nil {
			t.Fatalf("delta %s: the kernel does not encode its event: %v", d.DeltaID, err)
		}
		expect(t, deltasFile, d.DeltaID, "entry", &l.Entry, string(entry))
		// The verifier's own implementation agrees.
		ev, err := verifier.ParseEvent(entry)
		if err != nil {
			t.Fatal(err)
		}
		link, err := verifier.CheckDeltaEvent(ev)
		if err != nil || link.DeltaHash != hash || link.ParentHash != parent {
			t.Errorf("delta %s: the verifier reads %+v (%v)", d.DeltaID, link, err)
		}
		entries = append(entries, entry)
		deltas = append(deltas, d)
		parent = hash
	}
	if c, err := verifier.VerifyDeltaChain(entries, true); err != nil || c.Head != parent || c.Deltas != uint64(len(entries)) {
		t.Fatalf("the verifier refuses the chain: %+v, %v", c, err)
	}
	for i := range f.Rejects {
		r := &f.Rejects[i]
		var bad [][]byte
		var kernelOK = true
		prev := strings.Repeat("0", 64)
		for j, at := range r.Order {
			d := deltas[at]
			entry := entries[at]
			if r.Change != nil && *r.Change == at {
				d = changeDelta(t, r, d)
				if e, err := event.Encode(&event.Event{V: 1, ID: f.Chain[at].EventID, Time: mustInstant(t, d.Timestamp), Kind: event.KindSessionDelta,
					Actor: d.AgentDID, Session: d.SessionID, Delta: &d}); err == nil {
					entry = e
				} else {
					kernelOK = false // kernel/delta refuses it: encode by hand
					raw, _ := json.Marshal(&event.Event{V: 1, ID: f.Chain[at].EventID, Time: mustInstant(t, d.Timestamp), Kind: event.KindSessionDelta, Actor: d.AgentDID, Session: d.SessionID, Delta: &d})
					entry, _ = jcs.Transform(raw)
				}
			}
			if d.ParentHash != prev || (j == 0 && d.ParentHash != strings.Repeat("0", 64)) {
				kernelOK = false
			}
			prev = d.DeltaHash
			bad = append(bad, entry)
		}
		if kernelOK {
			t.Errorf("reject %q: kernel/delta's rules (Validate and the parent link) pass it", r.Name)
		}
		_, err := verifier.VerifyDeltaChain(bad, true)
		if err == nil {
			t.Errorf("reject %q (%s): the verifier accepts it", r.Name, r.Reason)
			continue
		}
		if r.Reason == "" {
			t.Errorf("reject %q gives no reason", r.Name)
		}
		expect(t, deltasFile, r.Name, "go_error", &r.GoError, err.Error())
	}
	save(t, deltasFile, &f)
}

// changeDelta applies a reject's change to a delta's JSON.
func changeDelta(t *testing.T, r *deltaReject, d delta.Delta) delta.Delta {
	t.Helper()
	if r.Parent != "" {
		d.ParentHash = r.Parent
	}
	raw, _ := json.Marshal(d)
	if !strings.Contains(string(raw), r.Old) {
		t.Fatalf("reject %q: %q is not in the delta %s", r.Name, r.Old, raw)
	}
	var out delta.Delta
	if err := json.Unmarshal([]byte(strings.Replace(string(raw), r.Old, r.New, 1)), &out); err != nil {
		t.Fatal(err)
	}
	if r.Reseal || r.Parent != "" {
		h, err := out.Hash()
		if err != nil {
			t.Fatal(err)
		}
		out.DeltaHash = h
	}
	return out
}

func mustInstant(t *testing.T, s string) event.Instant {
	t.Helper()
	i, err := event.ParseInstant(s)
	if err != nil {
		t.Fatal(err)
	}
	return i
}
