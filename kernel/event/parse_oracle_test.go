package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// parseEncodingJSON is Parse as it was before it decoded with strictjson:
// encoding/json, unknown fields refused, then the same canonical check.
// It is the oracle FuzzParse holds Parse to: both must accept the same
// entries, as the same events, so that a log replays as it always did.
func parseEncodingJSON(entry []byte) (*Event, error) {
	if len(entry) > MaxEntrySize {
		return nil, &TooLargeError{Size: len(entry)}
	}
	if err := checkJSON(entry, MaxJSONDepth+2); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(entry))
	dec.DisallowUnknownFields()
	var e Event
	if err := dec.Decode(&e); err != nil {
		return nil, err
	}
	again, err := Encode(&e)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, entry) {
		return nil, errors.New("not canonical")
	}
	return &e, nil
}

// parseAgreesWithOracle fails t unless Parse and parseEncodingJSON both
// refuse entry, or both accept it as equal events.
func parseAgreesWithOracle(t *testing.T, entry []byte) {
	t.Helper()
	got, err := Parse(entry)
	want, werr := parseEncodingJSON(entry)
	switch {
	case (err == nil) != (werr == nil):
		t.Fatalf("%q: Parse says %v, encoding/json's parse %v", entry, err, werr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("%q: Parse reads %+v, encoding/json's parse %+v", entry, got, want)
	}
}

// BenchmarkParseEncodingJSON is BenchmarkParse's entry read by the oracle,
// the parse replay used before: the ratio is what strictjson saves.
func BenchmarkParseEncodingJSON(b *testing.B) {
	entry, err := Encode(actionEvent(Mutate))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseEncodingJSON(entry); err != nil {
			b.Fatal(err)
		}
	}
}

// actionShapes are action events in every form parseAction reads, and
// some it leaves to the general decoder.
func actionShapes() map[string]*Event {
	m := map[string]*Event{}
	full := actionEvent(Mutate)
	full.Action.Envelope, full.Session, full.TraceID = "env-1", "s-1", "4bf92f3577b34da6a3ce929d0e0e4736"
	full.Action.Payload = json.RawMessage(`{"a":[1,{"b":"x\"}]"}],"c":"\\","d":null,"e":-1.5e3}`)
	m["envelope, session, trace, nested payload"] = full
	for name, payload := range map[string]string{"string": `"a,b}"`, "number": `12`, "true": `true`, "array": `[[],{}]`, "escaped": `"\u00e9"`} {
		e := actionEvent(Execute)
		e.Action.Payload = json.RawMessage(payload)
		m["payload "+name] = e
	}
	hashed := actionEvent(Create)
	hashed.Action.Envelope, hashed.Action.Payload, hashed.Action.PayloadHash = "env-2", nil, "sha256:"+strings.Repeat("ab", 32)
	m["envelope and payload hash"] = hashed
	res := actionEvent(Observe)
	res.Action.Resources = &Resources{Network: []string{"example.com"}, Tools: 2}
	m["resources (general path)"] = res
	escaped := actionEvent(Observe)
	escaped.Action.Target = "mail/inbox/é"
	m["non-ASCII target"] = escaped
	return m
}

// TestParseAction_SameAsGeneralPath: what parseAction reads is what the
// general decoder reads from the same entry, and the common forms of an
// action do take it.
func TestParseAction_SameAsGeneralPath(t *testing.T) {
	for name, e := range actionShapes() {
		t.Run(name, func(t *testing.T) {
			entry := mustEncode(t, e)
			parseAgreesWithOracle(t, entry)
			fast, ok := parseAction(entry)
			if wantFast := name != "resources (general path)"; ok != wantFast {
				t.Fatalf("parseAction took it: %v, want %v", ok, wantFast)
			}
			want, err := parseEncodingJSON(entry)
			if err != nil {
				t.Fatal(err)
			}
			if ok && (!reflect.DeepEqual(fast, want) || !reflect.DeepEqual(fast.Action, want.Action)) {
				t.Fatalf("parseAction read %+v %+v, want %+v %+v", fast, fast.Action, want, want.Action)
			}
		})
	}
}
