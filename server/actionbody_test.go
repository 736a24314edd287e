package server

import (
	"reflect"
	"testing"

	"github.com/annal-dev/annal/api"
)

// FuzzDecodeAction holds decodeAction to decodeJSON (strictjson.Decode),
// which it stands for on POST /v1/actions: for any body, the same request,
// or a refusal where decodeJSON refuses, with the same error.
func FuzzDecodeAction(f *testing.F) {
	for _, seed := range []string{
		`{"type":"mutate","target":"workspace/a","payload":{"text":"hi","n":[1,2.5,{"x":null}]}}`,
		`{"type":"create","target":"workspace/b","payload_hash":"sha256:00","envelope":"e1","session":"s","action_id":"edit","seal":true,"subject":"u","salt":"c2FsdA=="}`,
		`{ "type" : "observe" , "target" : "workspace/c" , "payload" : "text" , "seal" : false }`,
		"{\n\t\"type\": \"mutate\",\n\t\"target\": \"w/d\",\n\t\"payload\": 12\n}\n",
		`{}`,
		`{"type":"mutate","type":"create"}`,
		`{"Type":"mutate"}`,
		`{"type":"mut\u0061te","target":"w"}`,
		`{"type":null,"target":"w"}`,
		`{"type":"m","payload":null}`,
		`{"type":"m","resources":{"network":["a:443"],"tools":2}}`,
		`{"type":"m","unknown":1}`,
		`{"type":"m","seal":"yes"}`,
		`{"type":"m","payload":{"a":1,"a":2}}`,
		`{"type":"m","payload":1e400}`,
		`{"type":"m","payload":"\ud800"}`,
		`{"type":"m","target":"` + "\xff" + `"}`,
		`{"type":"m",}`,
		`{"type":"m"} {}`,
		`[]`,
		``,
		`{"payload":[],"payload":[]}`,
		`{"payload":{"deep":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, want api.ActionRequest
		gotErr := decodeAction(body, &got)
		wantErr := decodeJSON(body, &want)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("%q: decodeAction %v, decodeJSON %v", body, gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n decodeAction %+v\n decodeJSON   %+v", body, got, want)
		}
	})
}

// An agent's action is read by plainAction itself.
func TestDecodeAction_ReadsThePlainForm(t *testing.T) {
	body := []byte(`{"type":"mutate","target":"workspace/a","payload":{"b":[1,"x"]},"envelope":"e","seal":true}`)
	var r api.ActionRequest
	if !plainAction(body, &r) {
		t.Fatal("not read as plain")
	}
	if r.Type != "mutate" || r.Target != "workspace/a" || string(r.Payload) != `{"b":[1,"x"]}` || r.Envelope != "e" || !r.Seal {
		t.Fatalf("%+v", r)
	}
}

func BenchmarkDecodeAction(b *testing.B) {
	body := []byte(`{"type":"mutate","target":"workspace/notes/0001.md","payload":{"content_oid":"sha256:9ee620803bf22ef09ee620803bf22ef09ee620803bf22ef09ee620803bf22ef0","bytes":1234}}`)
	for _, tc := range []struct {
		name   string
		decode func([]byte, *api.ActionRequest) error
	}{
		{"decodeJSON", func(b []byte, r *api.ActionRequest) error { return decodeJSON(b, r) }},
		{"decodeAction", decodeAction},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r api.ActionRequest
				if err := tc.decode(body, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
