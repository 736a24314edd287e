package event

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// FuzzParse checks that an entry has one encoding: whatever Parse accepts,
// Encode writes back byte for byte; and that Parse accepts exactly what
// encoding/json's parse did, as the same event (parseAgreesWithOracle).
func FuzzParse(f *testing.F) {
	for _, e := range sampleEvents() {
		f.Add(mustEncode(f, e))
	}
	for _, e := range actionShapes() {
		f.Add(mustEncode(f, e))
	}
	// Every kind, from the known-answer vectors.
	if raw, err := os.ReadFile("../../testvectors/events.json"); err == nil {
		var vectors struct {
			Vectors []struct {
				Entry string `json:"entry"`
			} `json:"vectors"`
		}
		if err := json.Unmarshal(raw, &vectors); err != nil {
			f.Fatal(err)
		}
		for _, v := range vectors.Vectors {
			f.Add([]byte(v.Entry))
		}
	}
	// The sealed action and the erasure.
	if raw, err := os.ReadFile("../../testvectors/sealed.json"); err == nil {
		var vectors struct {
			Events []struct {
				Entry string `json:"entry"`
			} `json:"events"`
		}
		if err := json.Unmarshal(raw, &vectors); err != nil {
			f.Fatal(err)
		}
		for _, v := range vectors.Events {
			f.Add([]byte(v.Entry))
		}
	}
	good := string(mustEncode(f, actionEvent(Mutate)))
	for _, bad := range []string{
		"{ " + good[1:],
		good + "\n",
		strings.Replace(good, `{"flag":"read"}`, `{"z":1,"a":2}`, 1),
		strings.Replace(good, `"read"`, `"re\u0061d"`, 1),
		strings.Replace(good, `"v":1}`, `"v":1,"x":1}`, 1),
		strings.Replace(good, `"v":1}`, `"v":1,"v":1}`, 1),
		strings.Replace(good, `{"flag":"read"}`, `0.1`, 1),
		strings.Replace(good, `{"flag":"read"}`, `"\ud800"`, 1),
		strings.Replace(good, `{"flag":"read"}`, string(nested(MaxJSONDepth)), 1),
		strings.Replace(good, `mail/inbox/42`, `mail/../42`, 1),
		strings.Replace(good, `"v":1`, `"V":1`, 1),
		"", "null", "[]",
	} {
		f.Add([]byte(bad))
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		parseAgreesWithOracle(t, entry)
		e, err := Parse(entry)
		if err != nil {
			return
		}
		again, err := Encode(e)
		if err != nil {
			t.Fatalf("%q parses, but its event does not encode: %v", entry, err)
		}
		if !bytes.Equal(again, entry) {
			t.Fatalf("%q parses, but Encode gives %q", entry, again)
		}
	})
}

// FuzzCheckJSON checks that CheckJSON never accepts what is not JSON, nor
// what RFC 8785 cannot canonicalise.
func FuzzCheckJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `null`, `"x"`, `0`, `-0`, `1e22`, `0.1`, `9007199254740993`, `18446744073709551616`,
		`{"a":{"b":[1,{"c":null}]}}`, `{"a":1,"a":2}`, `{} {}`, `[1,]`, ` {"a" : 1} `,
		`"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\\ud800"`, `"\ud800\u0041"`, "\"\xff\"",
		`1e401`, `1e-400`, "1" + strings.Repeat("0", 128),
		string(nested(MaxJSONDepth)), string(nested(MaxJSONDepth + 1)),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if CheckJSON(data) != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("CheckJSON accepts %q, which encoding/json says is not JSON", data)
		}
		if _, err := jcs.Transform(data); err != nil {
			t.Fatalf("CheckJSON accepts %q, which RFC 8785 cannot canonicalise: %v", data, err)
		}
	})
}

// FuzzEncodeThenParse checks what replaying a log relies on: every entry
// Encode writes, whatever the caller's payload and target, Parse reads back
// as the same event.
func FuzzEncodeThenParse(f *testing.F) {
	for _, seed := range []struct{ payload, target string }{
		{`{"flag":"read"}`, "mail/inbox/42"},
		{`{ "b" : 1, "a" : [1, 2.5, -0, 1E2] }`, "a/b"},
		{`"\u00e9\ud83d\ude00\u2028\u007f"`, "docs/日本"},
		{`18446744073709551616`, "n"},
		{`0.000000000931322574615478515625`, "n"},
		{`9007199254740993`, "n"},
		{string(nested(MaxJSONDepth)), "deep"},
		{`null`, "a/../b"},
		{``, "x"},
	} {
		f.Add([]byte(seed.payload), seed.target)
	}
	f.Fuzz(func(t *testing.T, payload []byte, target string) {
		e := actionEvent(Mutate)
		e.Action.Target = target
		e.Action.Payload = payload
		entry, err := Encode(e)
		if err != nil {
			return
		}
		back, err := Parse(entry)
		if err != nil {
			t.Fatalf("Encode writes %q, which Parse refuses: %v", entry, err)
		}
		if back.Action.Target != target {
			t.Fatalf("target %q comes back as %q", target, back.Action.Target)
		}
		if again, _ := Encode(back); !bytes.Equal(again, entry) {
			t.Fatalf("Encode writes %q, then %q after Parse", entry, again)
		}
	})
}

// FuzzSealedRequestBody: a signed action body, as outside input, either is
// refused or becomes canonical JSON that carries no payload or salt when
// it carries a sealed member, and that it maps to itself (the form the
// log's events give back is stable).
func FuzzSealedRequestBody(f *testing.F) {
	salt := `"QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8="`
	f.Add([]byte(`{"payload":{"a":1},"salt":` + salt + `,"subject":"customer-1","target":"t","type":"create"}`))
	f.Add([]byte(`{"seal":true,"target":"t","type":"create"}`))
	f.Add([]byte(`{"target":"t","type":"create"}`))
	f.Add([]byte(`{"payload":null,"salt":` + salt + `,"subject":"x"}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		canon, err := jcs.Transform(body)
		if err != nil {
			return
		}
		out, err := SealedRequestBody(canon)
		if err != nil {
			return
		}
		again, err := jcs.Transform(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("%q became %q, not canonical JSON", canon, out)
		}
		if bytes.Contains(out, []byte(`"sealed":{`)) && !bytes.Equal(out, canon) {
			var m map[string]json.RawMessage
			if json.Unmarshal(out, &m) != nil || m["payload"] != nil || m["salt"] != nil {
				t.Fatalf("%q became %q, which keeps the payload or the salt", canon, out)
			}
		}
		if twice, err := SealedRequestBody(out); err != nil || !bytes.Equal(twice, out) {
			t.Fatalf("%q maps to %q, and that to %q (%v)", canon, out, twice, err)
		}
	})
}

// FuzzIsCanonical: what the fast check calls canonical, RFC 8785 (the full
// transform) leaves exactly as it is.
func FuzzIsCanonical(f *testing.F) {
	for _, e := range sampleEvents() {
		f.Add(mustEncode(f, e))
	}
	for _, s := range []string{`{"a":1,"b":[true,false,null],"c":{"d":"\u001f\n"}}`, `{"b":1,"a":2}`, `{"a":-0}`, `{"a":1.5}`,
		`{"a":"\u2028"}`, `{"é":1}`, `{"a":"<&>"}`, `[1e2]`, `{"a":1,"a":2}`, `"\u000a"`, `123456789012345`, `1234567890123456`,
		` { "content_oid" : "sha256:00aa", "bytes" : 12 , "tags":[ {"z":1,"y":[]} , 2 ] } `, `{"b":{"d":1,"c":2},"a":{"f":{},"e":[]}}`, `{"b":1,"a":2,"b":3}`, "{\"b\":1,\t\"a\":\"\\/\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Canonical answers what the full transform does, for any input.
		want, wantErr := jcs.Transform(b)
		got, err := Canonical(b)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Canonical(%q) = %q, %v; RFC 8785 gives %q, %v", b, got, err, want, wantErr)
		}
		if !isCanonical(b) {
			return
		}
		if wantErr != nil || !bytes.Equal(want, b) {
			t.Fatalf("isCanonical(%q), but RFC 8785 gives %q (%v)", b, want, wantErr)
		}
	})
}
