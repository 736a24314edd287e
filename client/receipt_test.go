package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
)

// annaldReceipt is a receipt as annald writes it.
const annaldReceipt = `{"status":"committed","event_id":"0193c2a4-5b6e-7f80-9a1b-2c3d4e5f6a7b","index":12345,"leaf_hash":"6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b","time":"2026-11-28T12:00:00.123456789Z","actor":"agent-1","type":"mutate","target":"workspace/a","envelope":"env-1","cost":15,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}` + "\n"

// FuzzDecodeReceipt holds decodeReceipt to json.Unmarshal: for any
// answer, into a receipt with fields already set, the same receipt, and
// an error exactly where json.Unmarshal fails.
func FuzzDecodeReceipt(f *testing.F) {
	for _, seed := range []string{
		annaldReceipt,
		`{}`,
		`{"status":"held","hold_id":"h-1","index":0,"cost":0}`,
		`{"status":"committed","proof":"line\nline","checkpoint":"a\u00e9"}`,
		`{"status":"committed","status":"twice"}`,
		`{"Status":"case","INDEX":3}`,
		`{"index":007}`,
		`{"index":18446744073709551616}`,
		`{"index":-1}`,
		`{"index":1.5}`,
		`{"index":"1"}`,
		`{"status":1}`,
		`{"status":null,"index":null}`,
		`{"unknown":"x","status":"ok"}`,
		`{"status":"ok",}`,
		`{"status":"ok"} `,
		`{ "status":"ok"}`,
		`{"status":"ok"}{}`,
		`[]`,
		``,
		`{"status":"<&>"}`,
		"{\"status\":\"\x7f\"}",
	} {
		f.Add([]byte(seed))
	}
	pre := api.Receipt{Status: "before", Index: 9, Reason: "kept unless set"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, got := pre, pre
		wantErr := json.Unmarshal(raw, &want)
		gotErr := decodeReceipt(raw, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%q: json.Unmarshal %v, decodeReceipt %v", raw, wantErr, gotErr)
		}
		if wantErr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("%q:\n json.Unmarshal %+v\n decodeReceipt  %+v", raw, want, got)
		}
	})
}

// annald's receipts are read by decodeReceipt itself, not handed to
// json.Unmarshal.
func TestDecodeReceipt_ReadsAnnaldsForm(t *testing.T) {
	var r api.Receipt
	if !plainReceipt([]byte(strings.TrimSuffix(annaldReceipt, "\n")), &r) {
		t.Fatal("annald's receipt is not in the plain form")
	}
	if r.Index != 12345 || r.Cost != 15 || r.Envelope != "env-1" || r.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("%+v", r)
	}
}

func BenchmarkDecodeReceipt(b *testing.B) {
	raw := []byte(annaldReceipt)
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r api.Receipt
			if err := json.Unmarshal(raw, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeReceipt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r api.Receipt
			if err := decodeReceipt(raw, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
