package testvectors

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/verifier"
)

const eventsFile = "events.json"

type eventVectors struct {
	Description string        `json:"description"`
	Vectors     []eventVector `json:"vectors"`
	Rejects     []eventReject `json:"rejects"`
}

// eventVector: Event is the input, Entry and LeafHash (hex) are expected.
type eventVector struct {
	Name     string      `json:"name"`
	Event    event.Event `json:"event"`
	Entry    string      `json:"entry"`
	LeafHash string      `json:"leaf_hash"`
}

// eventReject is an entry that a reader MUST refuse. It is the entry of the
// vector From with the first Old replaced by New (or by the bytes NewHex, for
// bytes a JSON string cannot hold); with no From, it is New itself. EntryHex
// is the result; Entry repeats it when it is UTF-8. GoError is the error
// Annal's event.Parse gives, kept so that a reviewer can see each entry is
// refused for its stated Reason and not by accident.
type eventReject struct {
	Name     string `json:"name"`
	Reason   string `json:"reason"`
	From     string `json:"from,omitempty"`
	Old      string `json:"old,omitempty"`
	New      string `json:"new,omitempty"`
	NewHex   string `json:"new_hex,omitempty"`
	Entry    string `json:"entry,omitempty"`
	EntryHex string `json:"entry_hex"`
	GoError  string `json:"go_error"`
}

func TestEventVectors(t *testing.T) {
	var f eventVectors
	load(t, eventsFile, &f)
	if len(f.Vectors) == 0 || len(f.Rejects) == 0 {
		t.Fatalf("%s has %d vectors and %d rejects", eventsFile, len(f.Vectors), len(f.Rejects))
	}
	entries := map[string][]byte{}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		entry, err := event.Encode(&v.Event)
		if err != nil {
			t.Errorf("vector %q: %v", v.Name, err)
			continue
		}
		entries[v.Name] = entry
		expect(t, eventsFile, v.Name, "entry", &v.Entry, string(entry))
		expect(t, eventsFile, v.Name, "leaf_hash", &v.LeafHash, hex.EncodeToString(leafHash(t, v.Name, entry)))
		checkEntry(t, v.Name, &v.Event, entry)
	}
	for i := range f.Rejects {
		r := &f.Rejects[i]
		entry := rejectEntry(t, r, entries)
		if entry == nil {
			continue
		}
		expect(t, eventsFile, r.Name, "entry_hex", &r.EntryHex, hex.EncodeToString(entry))
		text := ""
		if utf8.Valid(entry) {
			text = string(entry)
		}
		expect(t, eventsFile, r.Name, "entry", &r.Entry, text)
		if r.Reason == "" {
			t.Errorf("reject %q gives no reason", r.Name)
		}
		ev, err := event.Parse(entry)
		if err == nil {
			t.Errorf("reject %q (%s): event.Parse accepts %q as %+v", r.Name, r.Reason, entry, ev)
			continue
		}
		expect(t, eventsFile, r.Name, "go_error", &r.GoError, err.Error())
	}
	save(t, eventsFile, &f)
}

// leafHash computes SHA-256(0x00 || entry) by hand, and checks that Annal
// and the merkle library agree with it.
func leafHash(t *testing.T, name string, entry []byte) []byte {
	t.Helper()
	h := sha256.New()
	h.Write([]byte{0x00})
	h.Write(entry)
	want := h.Sum(nil)
	if ours := event.LeafHash(entry); !bytes.Equal(ours[:], want) {
		t.Errorf("vector %q: event.LeafHash = %x, SHA-256(0x00 || entry) = %x", name, ours, want)
	}
	if lib := rfc6962.DefaultHasher.HashLeaf(entry); !bytes.Equal(lib, want) {
		t.Errorf("vector %q: rfc6962 HashLeaf = %x, SHA-256(0x00 || entry) = %x", name, lib, want)
	}
	return want
}

// checkEntry reads an entry back three ways: Annal's strict parser, the RFC
// 8785 library on its own, and the offline verifier's reader, which is
// written apart from the kernel.
func checkEntry(t *testing.T, name string, in *event.Event, entry []byte) {
	t.Helper()
	if len(entry) > event.MaxEntrySize {
		t.Errorf("vector %q: entry is %d bytes", name, len(entry))
	}
	parsed, err := event.Parse(entry)
	if err != nil {
		t.Errorf("vector %q: event.Parse refuses the entry: %v", name, err)
	} else if again, _ := event.Encode(parsed); !bytes.Equal(again, entry) {
		t.Errorf("vector %q: parse and encode gives %s", name, again)
	}
	if canonical, err := jcs.Transform(entry); err != nil || !bytes.Equal(canonical, entry) {
		t.Errorf("vector %q: RFC 8785 library gives %s, %v for the entry", name, canonical, err)
	}
	ev, err := verifier.ParseEvent(entry)
	if err != nil {
		t.Errorf("vector %q: verifier.ParseEvent refuses the entry: %v", name, err)
		return
	}
	if ev.ID != in.ID || ev.Kind != string(in.Kind) || ev.Actor != in.Actor || !ev.Time.Equal(in.Time.Time) || ev.TraceID != in.TraceID {
		t.Errorf("vector %q: verifier reads %+v", name, ev)
	}
	if in.Action != nil && (ev.Type != string(in.Action.Type) || ev.Target != in.Action.Target) {
		t.Errorf("vector %q: verifier reads action %s on %q", name, ev.Type, ev.Target)
	}
}

func rejectEntry(t *testing.T, r *eventReject, entries map[string][]byte) []byte {
	t.Helper()
	repl := []byte(r.New)
	if r.NewHex != "" {
		var err error
		if repl, err = hex.DecodeString(r.NewHex); err != nil {
			t.Errorf("reject %q: new_hex: %v", r.Name, err)
			return nil
		}
	}
	if r.From == "" {
		return repl
	}
	base, ok := entries[r.From]
	if !ok {
		t.Errorf("reject %q: no vector %q", r.Name, r.From)
		return nil
	}
	if !strings.Contains(string(base), r.Old) || r.Old == string(repl) {
		t.Errorf("reject %q: the entry of %q does not contain %q, or the change is empty", r.Name, r.From, r.Old)
		return nil
	}
	return bytes.Replace(base, []byte(r.Old), repl, 1)
}
