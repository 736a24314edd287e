package strictjson

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
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
	{"empty", ``, "JSON is malformed: end of input at byte 0"},
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
	{"byte order mark", "\ufeff{}", `JSON is malformed: '\ufeff' at byte 0 where a value should start`},
	{"no-break space", "[\u00a01]", `JSON is malformed: '\u00a0' at byte 1 where a value should start`},
	{"vertical tab", "\v1", `JSON is malformed: '\v' at byte 0`},
	{"raw line feed in a string", "\"a\nb\"", `JSON is malformed: '\n' at byte 2 in a string (a control character must be escaped)`},
	{"raw NUL in a string", "\"a\x00b\"", `JSON is malformed: '\x00' at byte 2 in a string`},
	{"unterminated string", `["abc`, "JSON is malformed: end of input at byte 5 in a string"},
	{"unknown escape", `"\x"`, `JSON is malformed: 'x' at byte 2 in a string escape`},
	{"short \\u escape", `"\u12"}`, `JSON is malformed: '"' at byte 5 in a \u escape`},
	{"leading zero", `[01]`, `JSON is malformed: '1' at byte 2 after an array element`},
	{"leading zero at the top", `01`, "JSON has data after its value"},
	{"fraction without digits", `1.`, "JSON is malformed: end of input at byte 2 in a number"},
	{"no integer part", `.5`, "JSON is malformed: '.' at byte 0 where a value should start"},
	{"lone minus", `-`, "JSON is malformed: end of input at byte 1 in a number"},
	{"plus sign", `+1`, "JSON is malformed: '+' at byte 0 where a value should start"},
	{"missing colon", `{"a" 1}`, `JSON is malformed: '1' at byte 5 after a member name (want ':')`},
	{"misspelt literal", `[trve]`, "JSON is malformed: 'v' at byte 3 in the literal true"},
	{"invalid UTF-8 after an error", "[1,]\xff", "JSON is not valid UTF-8"},
	{"lone surrogates read alike", `{"\ud800":1,"\udbff":2}`, "JSON object has the member \"\ufffd\" twice"},
	{"duplicate among many members", `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"\u0072":19}`, `JSON object has the member "r" twice`},
	{"number before a lone surrogate", `["\ud800",9007199254740993]`, "JSON number 9007199254740993 would be written"},
	{"trailing data before a lone surrogate", `"\ud800" 1`, "JSON has data after its value"},
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

// TestSpecial8 checks special8 on every byte at every place in a word of
// plain bytes: it MUST flag every byte that plain does not hold as it is,
// and none that it does.
func TestSpecial8(t *testing.T) {
	for b := range 256 {
		for at := range 8 {
			word := []byte("abcdefgh")
			word[at] = byte(b)
			if got := special8(binary.LittleEndian.Uint64(word)); got == plain[b] {
				t.Errorf("special8(%q) = %v", word, got)
			}
		}
	}
}

// nested returns depth nested JSON arrays around 1: nested(2) is [[1]].
func nested(depth int) []byte {
	return []byte(strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth))
}

// TestCheck_NumberFastPath checks the claim the fast path of number rests
// on: checkNumber accepts every decimal of at most 15 digits without an
// exponent. It tries the extremes of each length and random ones.
func TestCheck_NumberFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var literals []string
	for digits := 1; digits <= 15; digits++ {
		for _, d := range []string{strings.Repeat("9", digits), "1" + strings.Repeat("0", digits-1), strings.Repeat("0", digits-1) + "1"} {
			literals = append(literals, d)
		}
		for range 500 {
			var d []byte
			for range digits {
				d = append(d, byte('0'+rng.IntN(10)))
			}
			literals = append(literals, string(d))
		}
	}
	for _, d := range literals {
		for point := 0; point < len(d); point++ {
			s := d
			if point > 0 {
				s = d[:point] + "." + d[point:]
			}
			if point != 1 && s[0] == '0' { // a leading zero is not JSON
				continue
			}
			for _, lit := range []string{s, "-" + s} {
				if err := checkNumber(lit); err != nil {
					t.Fatalf("the fast path accepts %s, checkNumber refuses it: %v", lit, err)
				}
			}
		}
	}
}
