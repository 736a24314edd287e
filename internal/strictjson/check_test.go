package strictjson

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// accepted are inputs Check MUST accept; they seed FuzzCheckAgreesWithOracle too.
var accepted = []string{
	`{}`, `[]`, `null`, `true`, `false`, `"x"`, `""`,
	`0`, `-0`, `1`, `-1`, `0.5`, `-1.25`, `1E2`, `1e+2`, `1e22`, `1e21`, `100e-2`,
	`9007199254740992`,       // 2^53
	`0.00000095367431640625`, // 2^-20, written 9.5367431640625e-7
	`0.1`, `1e23`, `3.14159`, // not doubles exactly, but canonical JSON writes the same decimal
	`18446744073709552000`, // RFC 8785's form of 2^64
	`{"a":{"b":[1,{"c":null}]}}`,
	` {"a" : 1} `,
	`"\u00e9\ud83d\ude00\u0000\n\"\\"`,
	`"\\ud800"`, // an escaped backslash, then the text "ud800"
	`"\\\ud83d\ude00"`,
	`{"a":1,"b":1}`,
	`{"a":{"x":1},"b":{"x":1}}`, // the same member name in two objects
	string(nested(MaxDepth)),
}

func TestCheck_Accepts(t *testing.T) {
	for _, in := range accepted {
		if err := Check([]byte(in)); err != nil {
			t.Errorf("Check(%s) = %v", in, err)
		}
		if _, err := jcs.Transform([]byte(in)); err != nil {
			t.Errorf("Check accepts %s, which RFC 8785 cannot canonicalise: %v", in, err)
		}
	}
}

// rejected are inputs Check MUST refuse, and what its error says; they seed
// FuzzCheckAgreesWithOracle too.
var rejected = []struct{ name, in, wantErr string }{
	{"empty", ``, "JSON is malformed: EOF"},
	{"invalid UTF-8 in string", "\"a\xffb\"", "JSON is not valid UTF-8"},
	{"invalid UTF-8 in name", "{\"\xc3\":1}", "JSON is not valid UTF-8"},
	{"UTF-8 surrogate bytes", "\"\xed\xa0\x80\"", "JSON is not valid UTF-8"},
	{"lone high surrogate", `"\ud800"`, `JSON string has a lone UTF-16 surrogate \ud800`},
	{"lone low surrogate", `"\udc00"`, `JSON string has a lone UTF-16 surrogate \udc00`},
	{"swapped surrogates", `"\ude00\ud83d"`, `lone UTF-16 surrogate \ude00`},
	{"high surrogate then letter", `"\ud800\u0041"`, `lone UTF-16 surrogate \ud800`},
	{"high surrogate then text", `"\ud800x"`, `lone UTF-16 surrogate \ud800`},
	{"high surrogate at end", `{"a":"x\uD83D"}`, `lone UTF-16 surrogate \ud83d`},
	{"lone surrogate in a name", `{"\ud800":1}`, `lone UTF-16 surrogate`},
	{"duplicate member", `{"a":1,"a":2}`, `JSON object has the member "a" twice`},
	{"nested duplicate member", `{"x":[{"a":1,"b":2,"a":3}]}`, `JSON object has the member "a" twice`},
	{"duplicate after escapes", `{"a":1,"\u0061":2}`, `JSON object has the member "a" twice`},
	{"trailing data", `{} {}`, "JSON has data after its value"},
	{"trailing garbage", `1 x`, "JSON"},
	{"trailing comma", `[1,]`, "JSON is malformed"},
	{"missing value", `{"a":}`, "JSON is malformed"},
	{"NaN", `NaN`, "JSON is malformed"},
	{"single quotes", `{'a':1}`, "JSON is malformed"},
	{"arrays too deep", string(nested(MaxDepth + 1)), "JSON nests deeper than 32 levels"},
	{"objects too deep", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), "JSON nests deeper than 32 levels"},
	{"2^53+1", `9007199254740993`, "JSON number 9007199254740993 would be written 9007199254740992 in canonical JSON"},
	{"0.1 with too many digits", `0.10000000000000000001`, "would be written 0.1 in canonical JSON"},
	{"2^64", `18446744073709551616`, "JSON number 18446744073709551616 would be written 18446744073709552000 in canonical JSON"},
	{"2^-30", `0.000000000931322574615478515625`, "would be written 9.313225746154785e-10 in canonical JSON"},
	{"overflow", `1e309`, "JSON number 1e309 is out of range for an IEEE 754 double"},
	{"huge exponent", `1e401`, "JSON number 1e401 has an exponent outside ±400"},
	{"tiny exponent", `1e-401`, "JSON number 1e-401 has an exponent outside ±400"},
	{"exponent beyond int", `1e99999999999999999999`, "has an exponent outside ±400"},
	{"129 characters", "1" + strings.Repeat("0", 128), "is longer than 128 characters"},
	{"number in a payload", `{"n":[1,2,9007199254740993]}`, "JSON number 9007199254740993"},
}

func TestCheck_Rejects(t *testing.T) {
	for _, tc := range rejected {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.in))
			if err == nil {
				t.Fatalf("Check(%q) accepts", tc.in)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

// TestCheck_CanonicalFormIsAccepted checks that Check accepts what
// RFC 8785 writes for every number it accepts, so an entry Encode writes
// passes Parse.
func TestCheck_CanonicalFormIsAccepted(t *testing.T) {
	for _, in := range []string{`[0.5, 1e21, 1e22, 100000000000000000000, 0.00000095367431640625, -0, 9007199254740992, -1.25, 1E2, 0.1, 1e23, 3.14159, 1.7976931348623157e308, 5e-324]`} {
		if err := Check([]byte(in)); err != nil {
			t.Fatalf("Check(%s) = %v", in, err)
		}
		canonical, err := jcs.Transform([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(canonical); err != nil {
			t.Errorf("Check refuses RFC 8785's form %s of %s: %v", canonical, in, err)
		}
		if !json.Valid(canonical) {
			t.Errorf("%s is not valid JSON", canonical)
		}
	}
}

// nested returns depth nested JSON arrays around 1: nested(2) is [[1]].
func nested(depth int) []byte {
	return []byte(strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth))
}
