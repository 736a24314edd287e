package testvectors

import (
	"encoding/hex"
	"testing"

	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/format/vfspath"
	"github.com/annal-dev/annal/kernel/event"
)

const vfsFile = "vfs.json"

// vfsVectors are the agent file system's paths and the entries its writes
// log (FORMATS.md, "The agent file system"): inputs given, everything
// else computed.
type vfsVectors struct {
	Description string           `json:"description"`
	Writes      []vfsWriteVector `json:"writes"`
	Refused     []vfsRefusal     `json:"refused"`
}

type vfsWriteVector struct {
	Name     string `json:"name"`
	URI      string `json:"uri"`
	Content  string `json:"content"`
	ID       string `json:"id"`
	Time     string `json:"time"`
	Actor    string `json:"actor"`
	Envelope string `json:"envelope"`
	Cost     uint64 `json:"cost"`
	// Computed.
	Target   string `json:"target"`
	Type     string `json:"type"`
	OID      string `json:"oid"`
	Entry    string `json:"entry"`
	LeafHash string `json:"leaf_hash"`
	// SignedRequest is the request a signature of the write states
	// (FORMATS.md, "Signed requests"): the action it is, which the
	// event gives back.
	SignedRequest string `json:"signed_request"`
}

type vfsRefusal struct {
	Name  string `json:"name"`
	URI   string `json:"uri"`
	Error string `json:"error"`
}

func TestVFSVectors(t *testing.T) {
	var f vfsVectors
	load(t, vfsFile, &f)
	if len(f.Writes) == 0 || len(f.Refused) == 0 {
		t.Fatalf("%s has %d writes and %d refusals", vfsFile, len(f.Writes), len(f.Refused))
	}
	for i := range f.Writes {
		v := &f.Writes[i]
		p, err := vfspath.ParseURI(v.URI)
		if err != nil || p.Writable() != nil {
			t.Errorf("vector %q: %s: %v %v", v.Name, v.URI, err, p.Writable())
			continue
		}
		expect(t, vfsFile, v.Name, "target", &v.Target, p.Target())
		expect(t, vfsFile, v.Name, "type", &v.Type, p.WriteType())
		expect(t, vfsFile, v.Name, "oid", &v.OID, oid.Of([]byte(v.Content)))
		at, err := event.ParseInstant(v.Time)
		if err != nil {
			t.Fatalf("vector %q: %v", v.Name, err)
		}
		ev := &event.Event{V: event.Version, ID: v.ID, Time: at, Kind: event.KindAction, Actor: v.Actor,
			Action:   &event.Action{Type: event.ActionType(p.WriteType()), Target: p.Target(), PayloadHash: oid.Of([]byte(v.Content)), Envelope: v.Envelope},
			Decision: &event.Decision{Outcome: event.OutcomeCommitted, Cost: v.Cost, Reserved: v.Cost, Settled: v.Cost}}
		entry, err := event.Encode(ev)
		if err != nil {
			t.Errorf("vector %q: %v", v.Name, err)
			continue
		}
		expect(t, vfsFile, v.Name, "entry", &v.Entry, string(entry))
		expect(t, vfsFile, v.Name, "leaf_hash", &v.LeafHash, hex.EncodeToString(leafHash(t, v.Name, entry)))
		body, err := p.WriteRequest(oid.Of([]byte(v.Content)), v.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		stated, err := event.CanonicalRequest("POST", event.ActionsPath, body)
		if err != nil {
			t.Fatal(err)
		}
		ev.Signed = &event.Signed{By: v.Actor}
		if given, err := event.RequestOf(ev); err != nil || string(given) != string(stated) {
			t.Errorf("vector %q: the event gives back %s, the write states %s (%v)", v.Name, given, stated, err)
		}
		expect(t, vfsFile, v.Name, "signed_request", &v.SignedRequest, string(stated))
	}
	for i := range f.Refused {
		r := &f.Refused[i]
		_, err := vfspath.ParseURI(r.URI)
		if err == nil {
			t.Errorf("vector %q: %s is accepted", r.Name, r.URI)
			continue
		}
		expect(t, vfsFile, r.Name, "error", &r.Error, err.Error())
	}
	save(t, vfsFile, &f)
}
