package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
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
