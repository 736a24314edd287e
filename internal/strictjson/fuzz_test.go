package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
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
