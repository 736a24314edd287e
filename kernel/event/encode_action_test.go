package event

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodeBoth encodes a valid event by appendAction and by the general
// path, and says whether appendAction took it.
func encodeBoth(t *testing.T, e *Event) (fast, general []byte, took bool) {
	t.Helper()
	if err := e.validate(); err != nil {
		t.Fatalf("the test's event is not valid: %v", err)
	}
	general, err := encodeGeneral(e)
	if err != nil {
		t.Fatal(err)
	}
	fast, took = appendAction(nil, e)
	return fast, general, took
}

// appendAction writes every action event it takes byte for byte as the
// general path (encoding/json, then RFC 8785 when needed) does, and
// leaves to it every event it does not write exactly.
func TestAppendAction_SameAsGeneralPath(t *testing.T) {
	withResources := func(r *Resources) *Event {
		e := actionEvent(Execute)
		e.Action.Resources = r
		return e
	}
	taken := map[string]*Event{
		"payload":      actionEvent(Mutate),
		"no payload":   func() *Event { e := actionEvent(Observe); e.Action.Payload = nil; return e }(),
		"payload null": func() *Event { e := actionEvent(Create); e.Action.Payload = json.RawMessage(`null`); return e }(),
		"payload hash": func() *Event {
			e := actionEvent(Create)
			e.Action.Payload = nil
			e.Action.PayloadHash = "sha256:" + credential
			return e
		}(),
		"envelope, session": func() *Event { e := actionEvent(Mutate); e.Action.Envelope = "env-1"; e.Session = "sess-1"; return e }(),
		"trace id": func() *Event {
			e := actionEvent(Mutate)
			e.Session, e.TraceID = "sess-1", "4bf92f3577b34da6a3ce929d0e0e4736"
			return e
		}(),
		"figures up to 2^53": func() *Event {
			e := actionEvent(Mutate)
			e.Decision.Cost, e.Decision.Reserved, e.Decision.Settled = 1<<53, 1<<53, 0
			return e
		}(),
		"all resources":   withResources(&Resources{Network: []string{"api.example.com", "b.example"}, FilesystemRead: []string{"/a"}, FilesystemWrite: []string{"/b", "/c"}, Subprocess: true, Tools: 7}),
		"some resources":  withResources(&Resources{FilesystemWrite: []string{"/w"}, Tools: 1}),
		"empty resources": withResources(&Resources{}),
		"escapes in target": func() *Event {
			e := actionEvent(Mutate)
			e.Action.Target = "a/\"q\"/\u2028/é/日本/😀/<&>"
			return e
		}(),
		"unicode payload": func() *Event {
			e := actionEvent(Mutate)
			e.Action.Payload = json.RawMessage("{\"a\":\"é😀\u2028\\n\",\"b\":[1,2]}")
			return e
		}(),
		"nanoseconds": func() *Event {
			e := actionEvent(Mutate)
			e.Time = mustInstant("2026-11-26T23:01:02.123456789Z")
			return e
		}(),
	}
	for name, e := range taken {
		t.Run(name, func(t *testing.T) {
			fast, general, took := encodeBoth(t, e)
			if !took {
				t.Fatal("appendAction left a plain action event to the general path")
			}
			if !bytes.Equal(fast, general) {
				t.Fatalf("appendAction wrote\n%s\nthe general path\n%s", fast, general)
			}
			if !isCanonical(fast) && !bytes.Equal(mustCanonical(t, fast), fast) {
				t.Fatalf("not canonical: %s", fast)
			}
		})
	}
	left := map[string]*Event{
		"another kind":            actorCreatedEvent(),
		"payload not canonical":   func() *Event { e := actionEvent(Mutate); e.Action.Payload = json.RawMessage(`{"b":1,"a":2}`); return e }(),
		"payload with a fraction": func() *Event { e := actionEvent(Mutate); e.Action.Payload = json.RawMessage(`{"a":1.5}`); return e }(),
		"a hold":                  func() *Event { e := actionEvent(Mutate); e.Hold = &Hold{ID: "h-1"}; return e }(),
	}
	for name, e := range left {
		t.Run(name, func(t *testing.T) {
			if _, took := appendAction(nil, e); took {
				t.Fatal("appendAction took an event it does not write")
			}
		})
	}
	t.Run("invalid UTF-8", func(t *testing.T) {
		e := actionEvent(Mutate)
		e.Action.Envelope = "env-\xff"
		if _, took := appendAction(nil, e); took {
			t.Fatal("appendAction took a string that is not UTF-8")
		}
	})
}

// appendCanonicalString writes a string as RFC 8785 does: as
// encoding/json writes it, then canonicalised (which undoes Go's escapes of
// U+2028 and U+2029).
func TestAppendCanonicalString(t *testing.T) {
	var all []byte
	for c := range 0x80 {
		all = append(all, byte(c))
	}
	for _, s := range []string{"", "plain", string(all), "é日本😀\u2028\u2029<&>", "\"\\\"", "\x7f\u0080\ufffd"} {
		got, ok := appendCanonicalString(nil, s)
		if !ok {
			t.Fatalf("%q refused", s)
		}
		js, _ := json.Marshal(s)
		if want := mustCanonical(t, js); !bytes.Equal(got, want) {
			t.Errorf("%q: wrote %s, RFC 8785 %s", s, got, want)
		}
	}
	if _, ok := appendCanonicalString(nil, "a\xffb"); ok {
		t.Error("a string that is not UTF-8 was written")
	}
}

func mustCanonical(t *testing.T, b []byte) []byte {
	t.Helper()
	c, err := Canonical(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FuzzAppendAction: for any valid action event built from the fuzzer's
// strings and figures, what appendAction writes (when it takes the event)
// is what the general path writes.
func FuzzAppendAction(f *testing.F) {
	f.Add("mail/inbox/42", "", "", []byte(`{"flag":"read"}`), uint64(3), "", uint64(0), false)
	f.Add("a/\"b\"/\\c", "env\x01", "sess-1", []byte(`"\u00e9\u2028"`), uint64(1<<53), "/fs/日本", uint64(9), true)
	f.Add("x", "e", "s", []byte(`{ "b" : 1 }`), uint64(0), "\n", uint64(1), true)
	f.Add("t", "", "", []byte(`null`), uint64(7), "", uint64(0), false)
	f.Fuzz(func(t *testing.T, target, envelope, session string, payload []byte, cost uint64, resource string, tools uint64, subprocess bool) {
		e := actionEvent(Execute)
		e.Action.Target, e.Action.Envelope, e.Session, e.Action.Payload = target, envelope, session, payload
		e.Decision.Cost, e.Decision.Reserved = cost, cost
		if tools%2 == 1 { // and a trace id: the member between time and v
			e.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		}
		if resource != "" || tools != 0 || subprocess {
			e.Action.Resources = &Resources{Network: []string{resource}, FilesystemWrite: []string{resource, "w"}, Tools: tools, Subprocess: subprocess}
		}
		if e.validate() != nil {
			return
		}
		general, err := encodeGeneral(e)
		if err != nil {
			return
		}
		if fast, took := appendAction(nil, e); took && !bytes.Equal(fast, general) {
			t.Fatalf("appendAction wrote\n%s\nthe general path\n%s", fast, general)
		}
	})
}

// BenchmarkEncodeAction: Encode of a governed agent's action event as the
// kernel writes it (envelope, payload of a content id and a size), and the
// general path it used to take for the same event, as a baseline.
func BenchmarkEncodeAction(b *testing.B) {
	e := actionEvent(Mutate)
	e.Action.Envelope = "env-0123456789abcdef"
	e.Action.Target = "workspace/gov/17/123456"
	e.Action.Payload = json.RawMessage(`{"bytes":123456,"content_oid":"sha256:` + credential + `"}`)
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("general-path", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := e.validate(); err != nil {
				b.Fatal(err)
			}
			if _, err := encodeGeneral(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
