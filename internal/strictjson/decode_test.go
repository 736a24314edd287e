package strictjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

type grant struct {
	Pattern string   `json:"pattern"`
	Actions []string `json:"actions"`
}

type common struct {
	Session string `json:"session,omitempty"`
}

type request struct {
	common
	Type     string           `json:"type"`
	Target   string           `json:"target"`
	Budget   uint64           `json:"budget,omitempty"`
	Trust    *float64         `json:"trust,omitempty"`
	Payload  json.RawMessage  `json:"payload,omitempty"`
	Grants   []grant          `json:"grants,omitempty"`
	Labels   map[string]grant `json:"labels,omitempty"`
	Next     *request         `json:"next,omitempty"`
	Kind     string
	Internal string `json:"-"`
	Any      any    `json:"any,omitempty"`
}

func TestDecode_ExactNames(t *testing.T) {
	trust := 0.5
	for _, tc := range []struct {
		name, in string
		want     request
	}{
		{"flat", `{"type":"observe","target":"workspace/a","budget":10}`,
			request{Type: "observe", Target: "workspace/a", Budget: 10}},
		{"omitempty fields absent", `{"type":"observe","target":"a"}`, request{Type: "observe", Target: "a"}},
		{"pointer", `{"trust":0.5}`, request{Trust: &trust}},
		{"embedded struct's member", `{"session":"s1","target":"a"}`, request{common: common{Session: "s1"}, Target: "a"}},
		{"untagged field by its Go name", `{"Kind":"agent"}`, request{Kind: "agent"}},
		{"slice of structs", `{"grants":[{"pattern":"a/*","actions":["mutate"]},{"pattern":"b","actions":[]}]}`,
			request{Grants: []grant{{"a/*", []string{"mutate"}}, {"b", []string{}}}}},
		{"map keys as they are", `{"labels":{"K":{"pattern":"x","actions":null},"k":{"pattern":"y","actions":null},"\u212a":{"pattern":"z","actions":null}}}`,
			request{Labels: map[string]grant{"K": {Pattern: "x"}, "k": {Pattern: "y"}, "\u212a": {Pattern: "z"}}}},
		{"nested struct", `{"next":{"target":"b","next":{"type":"mutate"}}}`,
			request{Next: &request{Target: "b", Next: &request{Type: "mutate"}}}},
		{"escaped name", `{"t\u0061rget":"a"}`, request{Target: "a"}},
		{"any holds anything", `{"any":{"Target":1}}`, request{Any: map[string]any{"Target": 1.0}}},
		{"null leaves a field zero", `{"target":null,"grants":null}`, request{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got request
			if err := Decode([]byte(tc.in), &got); err != nil {
				t.Fatalf("Decode(%s) = %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decode(%s) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// TestDecode_RawMessageLeftAlone: a json.RawMessage gets the member's bytes
// as sent, white space and member names included, for its own reader to
// judge (a payload is logged as sent, then canonicalised).
func TestDecode_RawMessageLeftAlone(t *testing.T) {
	for _, raw := range []string{`{ "Target" : 1 , "target":[1, 2] }`, `null`, `"x"`, `[{"A":{}}]`, `0.5`} {
		var got request
		if err := Decode([]byte(`{"payload":`+raw+`}`), &got); err != nil {
			t.Fatalf("payload %s: %v", raw, err)
		}
		if string(got.Payload) != raw {
			t.Errorf("payload %s read as %s", raw, got.Payload)
		}
	}
}

// TestAttack_CaseVariantMember: a member named in another case than its
// field is refused, alone or beside the exact one, at any depth. With
// encoding/json the variant would win: {"target":"workspace/checked",
// "Target":"workspace/logged"} would act on workspace/logged.
func TestAttack_CaseVariantMember(t *testing.T) {
	for _, tc := range []struct{ name, in, wantErr string }{
		{"after the exact one", `{"target":"workspace/checked","Target":"workspace/logged"}`,
			`JSON member "Target" is not known: member names are case-sensitive, and this one is "target"`},
		{"before the exact one", `{"Target":"workspace/logged","target":"workspace/checked"}`, `"Target"`},
		{"upper case type", `{"type":"observe","TYPE":"mutate"}`, `JSON member "TYPE" is not known`},
		{"budget", `{"budget":10,"Budget":100000}`, `"Budget"`},
		{"alone", `{"tarGet":"a"}`, `this one is "target"`},
		{"embedded struct's member", `{"Session":"s"}`, `this one is "session"`},
		{"untagged field in lower case", `{"kind":"agent"}`, `this one is "Kind"`},
		{"nested", `{"next":{"target":"a","TARGET":"b"}}`, `JSON member "TARGET" in /next is not known`},
		{"in a slice of structs", `{"grants":[{"pattern":"a","actions":[]},{"Pattern":"b","actions":[]}]}`,
			`JSON member "Pattern" in /grants/1 is not known`},
		{"in a map's value", `{"labels":{"x":{"pattern":"a","Actions":["mutate"]}}}`, `JSON member "Actions" in /labels/x is not known`},
		{"escaped", `{"target":"a","\u0054arget":"b"}`, `"Target"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertRefused(t, tc.in, tc.wantErr)
		})
	}
}

// TestAttack_UnicodeFoldedMember: names that Unicode case folding makes
// equal to a field's, which encoding/json accepts: the long s ſ (U+017F)
// folds to s, the Kelvin sign K (U+212A) to k.
func TestAttack_UnicodeFoldedMember(t *testing.T) {
	for _, tc := range []struct{ name, in, field string }{
		{"long s", `{"ſession":"s1"}`, "session"},
		{"long s escaped", `{"\u017fession":"s1"}`, "session"},
		{"long s in type", `{"type":"observe","typſ":"x"}`, ""},
		{"Kelvin sign", `{"\u212aind":"x"}`, "Kind"},
		{"Kelvin sign as UTF-8", "{\"\u212aind\":\"x\"}", "Kind"},
		{"Kelvin sign beside the exact name", "{\"Kind\":\"a\",\"\u212aind\":\"b\"}", "Kind"},
		{"budget with a capital T", `{"budget":1,"budgeT":100000}`, "budget"},
		{"long s in a nested member", `{"next":{"ſession":"x"}}`, "session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := "is not known"
			if tc.field != "" {
				want = `this one is "` + tc.field + `"`
			}
			assertRefused(t, tc.in, want)
		})
	}
}

// TestEncodingJSONFolds shows that the attacks above are real: encoding/json
// reads every one of these names as the field's.
func TestEncodingJSONFolds(t *testing.T) {
	for _, in := range []string{`{"Target":"x"}`, `{"TARGET":"x"}`, `{"ſession":"x"}`, `{"\u212aind":"x"}`} {
		var v request
		if err := json.Unmarshal([]byte(in), &v); err != nil {
			t.Fatal(err)
		}
		if v.Target != "x" && v.Session != "x" && v.Kind != "x" {
			t.Errorf("encoding/json no longer folds %s: update the package comment", in)
		}
	}
}

func TestAttack_DuplicateMember(t *testing.T) {
	assertRefused(t, `{"target":"a","target":"b"}`, `JSON object has the member "target" twice`)
	assertRefused(t, `{"target":"a","t\u0061rget":"b"}`, `JSON object has the member "target" twice`)
	assertRefused(t, `{"next":{"type":"a","type":"b"}}`, `JSON object has the member "type" twice`)
	assertRefused(t, `{"labels":{"x":{"pattern":"a","actions":[]},"x":{"pattern":"b","actions":[]}}}`, `JSON object has the member "x" twice`)
}

func TestAttack_UnknownMember(t *testing.T) {
	assertRefused(t, `{"target":"a","_hold_approved":true}`, `JSON member "_hold_approved" is not known`)
	assertRefused(t, `{"Internal":"x"}`, `JSON member "Internal" is not known`)
	assertRefused(t, `{"-":"x"}`, `JSON member "-" is not known`)
	assertRefused(t, `{"common":{"session":"x"}}`, `JSON member "common" is not known`)
	assertRefused(t, `{"grants":[{"pattern":"a","actions":[],"x":1}]}`, `JSON member "x" in /grants/0 is not known`)
	assertRefused(t, `{"next":{"next":{"a/b~c":1}}}`, `JSON member "a/b~c" in /next/next is not known`)
}

// TestDecode_RefusesWhatCheckRefuses: Decode runs Check first.
func TestDecode_RefusesWhatCheckRefuses(t *testing.T) {
	for _, in := range []string{
		`{"budget":9007199254740993}`, `{"target":"\ud800"}`, "{\"target\":\"\xff\"}", `{"target":"a"} {}`,
		`{"payload":` + string(nested(MaxDepth)) + `}`, ``, `{"target":"a",}`,
	} {
		var v request
		if err := Decode([]byte(in), &v); err == nil {
			t.Errorf("Decode(%q) accepts", in)
		}
	}
}

// TestDecode_TypeMismatch: a value of the wrong type is refused, and the
// error says where.
func TestDecode_TypeMismatch(t *testing.T) {
	assertRefused(t, `{"budget":-1}`, `/budget`)
	assertRefused(t, `{"budget":1.5}`, `/budget`)
	assertRefused(t, `{"budget":"10"}`, `/budget`)
	assertRefused(t, `{"grants":{"pattern":"a"}}`, `/grants`)
	assertRefused(t, `[]`, `array`)
}

// TestDecode_TypeMismatchWordedTheSameEveryRun: the library words such an
// error one of two ways, chosen once per process; Decode words it its own
// way, which a known-answer vector may record.
func TestDecode_TypeMismatchWordedTheSameEveryRun(t *testing.T) {
	var v request
	err := Decode([]byte(`{"budget":"10"}`), &v)
	if want := `JSON string at /budget does not fit Go type uint64`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v, want it to start %q", err, want)
	}
}

// TestDecode_NothingChangesOnRefusal: a refused input leaves the
// destination as it was, even when the library had filled some fields
// before it met the bad member; an accepted one replaces it whole.
func TestDecode_NothingChangesOnRefusal(t *testing.T) {
	before := request{Type: "keep", Grants: []grant{{Pattern: "keep"}}}
	v := before
	if err := Decode([]byte(`{"type":"observe","grants":[{"pattern":"p","actions":[]}],"Target":"x"}`), &v); err == nil {
		t.Fatal("accepted")
	}
	if !reflect.DeepEqual(v, before) {
		t.Fatalf("refused input changed the destination to %+v", v)
	}
	if err := Decode([]byte(`{"target":"x"}`), &v); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, request{Target: "x"}) {
		t.Fatalf("accepted input merged into the destination: %+v", v)
	}
}

type ownParser struct{ got string }

func (o *ownParser) UnmarshalJSON(data []byte) error {
	if strings.Contains(string(data), "bad") {
		return errors.New("own parser says bad")
	}
	o.got = string(data)
	return nil
}

// TestDecode_OwnUnmarshalJSON: a type with its own UnmarshalJSON gets the
// value's exact bytes and its error is passed on.
func TestDecode_OwnUnmarshalJSON(t *testing.T) {
	var v struct {
		X ownParser `json:"x"`
	}
	if err := Decode([]byte(`{"x":{ "Any" : [1] }}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.X.got != `{ "Any" : [1] }` {
		t.Errorf("UnmarshalJSON got %q", v.X.got)
	}
	if err := Decode([]byte(`{"x":"bad"}`), &v); err == nil || !strings.Contains(err.Error(), "own parser says bad") {
		t.Errorf("error %v does not pass on the method's", err)
	}
}

func TestDecode_NeedsPointer(t *testing.T) {
	var v request
	if err := Decode([]byte(`{}`), v); err == nil {
		t.Error("accepts a struct value")
	}
	if err := Decode([]byte(`{}`), (*request)(nil)); err == nil {
		t.Error("accepts a nil pointer")
	}
}

func assertRefused(t *testing.T, in, wantErr string) {
	t.Helper()
	v := request{Target: "untouched"}
	err := Decode([]byte(in), &v)
	if err == nil {
		t.Fatalf("Decode(%s) accepts: %+v", in, v)
	}
	if !strings.Contains(err.Error(), wantErr) {
		t.Errorf("Decode(%s) error %q does not say %q", in, err, wantErr)
	}
	if !reflect.DeepEqual(v, request{Target: "untouched"}) {
		t.Errorf("Decode(%s) refused but changed the destination to %+v", in, v)
	}
}
