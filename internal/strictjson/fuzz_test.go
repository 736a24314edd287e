package strictjson

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzStrictDecode checks Decode against an oracle written apart from it:
// whatever Decode accepts into a request, every member name of every object
// in the input is exactly the JSON name of a field of the Go struct at that
// position (or a map key, or inside a value left unread). And what it
// refuses leaves the destination as it was.
func FuzzStrictDecode(f *testing.F) {
	for _, seed := range []string{
		`{"type":"observe","target":"workspace/a","budget":10}`,
		`{"target":"workspace/checked","Target":"workspace/logged"}`,
		`{"type":"observe","TYPE":"mutate"}`,
		`{"budget":10,"Budget":100000}`,
		`{"budget":1,"budgeT":100000}`,
		`{"ſession":"s1"}`,
		`{"\u017fession":"s1"}`,
		"{\"\u212aind\":\"x\"}",
		`{"Kind":"a","kind":"b"}`,
		`{"session":"s","Session":"t"}`,
		`{"target":"a","target":"b"}`,
		`{"target":"a","_hold_approved":true}`,
		`{"grants":[{"pattern":"a/*","actions":["mutate"]},{"Pattern":"b","actions":[]}]}`,
		`{"labels":{"K":{"pattern":"x","actions":null},"k":{"pattern":"y","actions":[]}}}`,
		`{"labels":{"x":{"pattern":"a","Actions":[]}}}`,
		`{"next":{"target":"b","next":{"type":"mutate","TYPE":"x"}}}`,
		`{"payload":{ "Target" : 1 , "target":[1, 2] },"any":{"X":[{"Y":1}]}}`,
		`{"trust":0.5,"Internal":"x","-":1,"common":{}}`,
		`{"t\u0061rget":"a","\u0054arget":"b"}`,
		`[]`, `null`, `{}`, `{"next":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := request{Target: "untouched"}
		if err := Decode(data, &v); err != nil {
			if !reflect.DeepEqual(v, request{Target: "untouched"}) {
				t.Fatalf("Decode(%q) refused (%v) but changed the destination to %+v", data, err, v)
			}
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := namesFit(dec, reflect.TypeFor[request](), ""); err != nil {
			t.Fatalf("Decode accepts %q, but %v", data, err)
		}
	})
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// namesFit reads one JSON value from dec and checks that every object in
// it read into a struct names only fields of that struct, exactly. It is
// the oracle of FuzzStrictDecode, so it shares no code with Decode: it
// walks encoding/json's token stream beside the Go type.
func namesFit(dec *json.Decoder, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshaler) {
		var skip json.RawMessage // any, json.RawMessage: not read by Decode
		return dec.Decode(&skip)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		fields := oracleFields(t)
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			name := key.(string)
			var next reflect.Type
			switch t.Kind() {
			case reflect.Map:
				next = t.Elem()
			case reflect.Struct:
				ft, ok := fields[name]
				if !ok {
					return fmt.Errorf("member %q at %q names no field of %v", name, at, t)
				}
				next = ft
			default:
				return fmt.Errorf("an object at %q for a %v", at, t)
			}
			if err := namesFit(dec, next, at+"/"+name); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return fmt.Errorf("an array at %q for a %v", at, t)
		}
		for i := 0; dec.More(); i++ {
			if err := namesFit(dec, t.Elem(), fmt.Sprintf("%s/%d", at, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// oracleFields maps the JSON name of each field of struct type t, embedded
// structs' fields included, to its type.
func oracleFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name := tag
		if i := strings.IndexByte(tag, ','); i >= 0 {
			name = tag[:i]
		}
		if f.Anonymous && name == "" {
			for n, ft := range oracleFields(f.Type) {
				out[n] = ft
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// FuzzCheckAgreesWithOracle holds CheckDepth to oracleCheckDepth, the
// Decoder.Token walk it replaced: on every input, at the default bound and
// at a small one, both accept or both refuse, and a refusal says the same
// thing, word for word, except that malformed JSON may be described in
// other words.
func FuzzCheckAgreesWithOracle(f *testing.F) {
	for _, seed := range oracleSeeds(f) {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, depth := range []int{MaxDepth, 2} {
			got, want := CheckDepth(data, depth), oracleCheckDepth(data, depth)
			if refusal(got) != refusal(want) {
				t.Fatalf("CheckDepth(%q, %d) = %v, the oracle says %v", data, depth, got, want)
			}
		}
	})
}

// refusal is what an error from a checker must say alike in both: its
// whole text, or only that the JSON is malformed.
func refusal(err error) string {
	switch {
	case err == nil:
		return "accepted"
	case strings.HasPrefix(err.Error(), "JSON is malformed: "):
		return "JSON is malformed"
	}
	return err.Error()
}

// oracleSeeds are the inputs of the other tests of Check, the entries of
// the event test vectors, and cases picked to trip a hand-written scanner.
func oracleSeeds(f *testing.F) []string {
	seeds := append([]string(nil), accepted...)
	for _, tc := range rejected {
		seeds = append(seeds, tc.in)
	}
	seeds = append(seeds,
		// Member names: escapes, duplicates after unescaping, lone
		// surrogates (read as U+FFFD by encoding/json).
		`{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"\/":1,"/":2}`, `{"\n":1,"\u000a":2}`,
		`{"é":1,"\u00e9":2}`, `{"é":1,"\u00E9":2}`, `{"\ud83d\ude00":1,"😀":2}`,
		`{"\ud800":1,"\udbff":2}`, `{"\ud800":1,"\ufffd":2}`, `{"\ud800":1,"�":2}`,
		`{"a\\":1,"a\\\\":2}`, `{"ab":1,"a":2,"b":3,"ab":4}`, `{"":1,"":2}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"a":19}`,
		`{"a":{"a":{"a":1}},"b":{"a":1,"a":2}}`, `{"a":1,"a"}`, `{"a":1,"a"`, `{"a":1,"a":1e999}`,
		// Surrogates.
		`"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\ud800\ud800\udc00"`, `"\udbff\udfff"`, `"\ud800\\udc00"`,
		`"\ud800\uZZZZ"`, `"\ud800\u00"`, `"\ud800`, `["\ud800",1e999]`, `["\ud800"`, `"\ud800" x`,
		`"\ud800" "\udc00"`, `["\udc00","\ud800"]`,
		// Nesting at the bound.
		string(nested(MaxDepth-1)), string(nested(MaxDepth)), string(nested(MaxDepth+1)), "[[[", "[[]", "[[[[[",
		strings.Repeat(`{"a":`, MaxDepth)+"1"+strings.Repeat("}", MaxDepth),
		strings.Repeat(`{"a":[`, MaxDepth/2)+"1"+strings.Repeat("]}", MaxDepth/2),
		// Numbers.
		`1e400`, `1e-400`, `1e+400`, `1e401`, `0.1`, `9007199254740993`, `-9007199254740993`, `-0`, `-0.0`, `0e0`,
		`1E2`, `1e+2`, `1e-2`, `100e-2`, `18446744073709551616`, `1e99999999999999999999`, `1e0000000000000000000001`,
		`123456789012345`, `1234567890123456`, `12345678901234567`, `0.123456789012345`, `1.23456789012345`,
		`99999999999999.9`, `999999999999999`, `0.000000000000001`, `1.7976931348623157e308`, `1.7976931348623159e308`,
		`5e-324`, `2e-324`, `4.9406564584124654e-324`, `2.2250738585072014e-308`, `1e21`, `1e-7`, `123e-20`,
		`01`, `-01`, `00`, `-`, `-a`, `.5`, `1.`, `1.e5`, `1e`, `1e+`, `1e-`, `+1`, `1.5.5`, `[1.5.5]`, `[01]`,
		`0x10`, `1_000`, `Infinity`, `-Infinity`, `[1 2]`, `1 2`, `[-]`, `[1e]`,
		"1"+strings.Repeat("0", 127), "0."+strings.Repeat("0", 125)+"1", "0."+strings.Repeat("0", 126)+"1",
		// Literals and structure.
		`tru`, `truex`, `[truefalse]`, `nul`, `nulll`, `[null,]`, `{"a":1,}`, `{,}`, `[,1]`, `{"a" 1}`, `{"a"}`,
		`{1:2}`, `{"a":1 "b":2}`, `{"a"::1}`, `[}`, `{]`, `{"a":1]`, `[1}`, `]`, `}`, `:`, `,`, `[1]]`, `{}}`,
		// White space: only space, tab, LF and CR.
		" \t\r\n1 \t\r\n", "\v1", "\f1", "1\v", "\u00a01", "1\u00a0", "\u20281", "\u3000[]", "[\u00a01]",
		"\ufeff{}", "{}\ufeff", "\xef\xbb\xbf1",
		// NUL bytes, control characters, invalid UTF-8.
		"\"a\\u0000b\"", "\"a\x00b\"", "\x00", "1\x00", "\"\x01\"", "\"\x1f\"", "\"\t\"", "\"\n\"", "\"\x7f\"",
		"\"\xff\"", "\"\xc3\x28\"", "\"\xe2\x82\"", "\"\xf0\x9f\x98\"", "\"\xf4\x90\x80\x80\"", "\"\xc0\xaf\"",
		"{\"a\":1}\xff", "[1,\xff]", "\xff", "[\"x\", 1e999, \"\xff\"]", "{\"\xff\":1,\"\xff\":2}",
		`"\x"`, `"\u12"`, `"\u12G4"`, `"\`, `"abc`, `"abc\"`, `"\'"`, `"\U0041"`,
		``, ` `, "\n",
	)
	// The entries of the event test vectors, accepted and refused.
	raw, err := os.ReadFile(filepath.Join("..", "..", "testvectors", "events.json"))
	if err != nil {
		f.Fatal(err)
	}
	var vectors struct {
		Vectors []struct{ Entry string }
		Rejects []struct {
			EntryHex string `json:"entry_hex"`
		}
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		f.Fatal(err)
	}
	for _, v := range vectors.Vectors {
		seeds = append(seeds, v.Entry)
	}
	for _, r := range vectors.Rejects {
		entry, err := hex.DecodeString(r.EntryHex)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(entry))
	}
	return seeds
}
