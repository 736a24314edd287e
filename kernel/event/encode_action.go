package event

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// appendAction writes an action event, the kind the kernel writes for
// nearly every request, in RFC 8785 canonical form, member by member,
// without reflection. It answers false, and Encode takes the general path
// (encoding/json, then the RFC 8785 transform when needed), for anything
// else: another kind, a hold or a signature, a sealed payload, a payload
// that is not canonical as it stands, a string that is not valid UTF-8. What
// it writes is byte for byte what the general path writes for the same
// event (TestAppendAction_SameAsGeneralPath, FuzzAppendAction).
//
// Why: in the governed benchmark encoding/json took about 5 µs an action,
// most of it checking and compacting the payload the request's decoding
// and the form gate had already checked, and then the canonical check
// scanned the whole entry again.
//
// The caller has validated e: numbers are at most 2^53, which RFC 8785
// writes as plain integers.
func appendAction(dst []byte, e *Event) ([]byte, bool) {
	if !writesAsAction(e) {
		return dst, false
	}
	d := e.Decision
	w := canonWriter{dst: dst, ok: true}.
		raw(`{"action":`).action(e.Action).
		raw(`,"actor":`).str(e.Actor).
		raw(`,"decision":{"cost":`).uint(d.Cost).
		raw(`,"outcome":`).str(d.Outcome).
		raw(`,"reserved":`).uint(d.Reserved).
		raw(`,"settled":`).uint(d.Settled).
		raw(`},"id":`).str(e.ID).
		raw(`,"kind":"action"`)
	if e.Session != "" {
		w = w.raw(`,"session":`).str(e.Session)
	}
	w = w.raw(`,"time":`).time(e.Time)
	if e.TraceID != "" {
		w = w.raw(`,"trace_id":`).str(e.TraceID)
	}
	w = w.raw(`,"v":`)
	w.dst = strconv.AppendInt(w.dst, int64(e.V), 10)
	return append(w.dst, '}'), w.ok
}

// writesAsAction reports whether appendAction writes e: an action event
// without a hold, a signature or a sealed payload, whose payload is
// canonical as it stands.
func writesAsAction(e *Event) bool {
	if e.Kind != KindAction || e.Action == nil || e.Decision == nil || e.Hold != nil || e.Signed != nil || e.Action.Sealed != nil {
		return false
	}
	return len(e.Action.Payload) == 0 || isCanonical(e.Action.Payload)
}

// canonWriter appends RFC 8785 JSON to dst. ok turns false, for good, at
// a string RFC 8785 has no form for. Its methods take and return it by
// value, as append does a slice, so that it stays in registers.
type canonWriter struct {
	dst []byte
	ok  bool
}

func (w canonWriter) raw(s string) canonWriter {
	w.dst = append(w.dst, s...)
	return w
}

func (w canonWriter) str(s string) canonWriter {
	if w.ok {
		w.dst, w.ok = appendCanonicalString(w.dst, s)
	}
	return w
}

func (w canonWriter) uint(n uint64) canonWriter {
	w.dst = strconv.AppendUint(w.dst, n, 10)
	return w
}

// time writes an instant as str(t.String()) would, without making the
// string first: the canonical form of a time has nothing to escape.
func (w canonWriter) time(t Instant) canonWriter {
	if t.IsZero() {
		return w.raw(`""`)
	}
	w.dst = append(w.dst, '"')
	w.dst = t.UTC().AppendFormat(w.dst, time.RFC3339Nano)
	w.dst = append(w.dst, '"')
	return w
}

// member writes the separator and the name of an object's next member;
// first says whether it is the object's first.
func (w canonWriter) member(first bool, name string) canonWriter {
	if !first {
		w.dst = append(w.dst, ',')
	}
	w.dst = append(w.dst, '"')
	w.dst = append(w.dst, name...)
	w.dst = append(w.dst, `":`...)
	return w
}

func (w canonWriter) action(a *Action) canonWriter {
	w = w.raw(`{`)
	first := true
	if a.Envelope != "" {
		w = w.member(first, "envelope").str(a.Envelope)
		first = false
	}
	if len(a.Payload) > 0 {
		w = w.member(first, "payload")
		w.dst = append(w.dst, a.Payload...)
		first = false
	}
	if a.PayloadHash != "" {
		w = w.member(first, "payload_hash").str(a.PayloadHash)
		first = false
	}
	if a.Resources != nil {
		w = w.member(first, "resources").resources(a.Resources)
		first = false
	}
	return w.member(first, "target").str(a.Target).
		member(false, "type").str(string(a.Type)).
		raw(`}`)
}

func (w canonWriter) resources(r *Resources) canonWriter {
	w = w.raw(`{`)
	first := true
	for _, l := range []struct {
		name string
		list []string
	}{{"fs_read", r.FilesystemRead}, {"fs_write", r.FilesystemWrite}, {"network", r.Network}} {
		if len(l.list) > 0 {
			w = w.member(first, l.name).strings(l.list)
			first = false
		}
	}
	if r.Subprocess {
		w = w.member(first, "subprocess").raw(`true`)
		first = false
	}
	if r.Tools != 0 {
		w = w.member(first, "tools").uint(r.Tools)
	}
	return w.raw(`}`)
}

// strings writes a list of strings.
func (w canonWriter) strings(l []string) canonWriter {
	w = w.raw(`[`)
	for i, s := range l {
		if i > 0 {
			w = w.raw(`,`)
		}
		w = w.str(s)
	}
	return w.raw(`]`)
}

// appendCanonicalString writes s as an RFC 8785 string (§3.2.2.2): '"' and
// '\' escaped, control characters as \b \f \n \r \t or \u00xx with
// lower-case hex, everything else as it is. It answers false for a string
// that is not valid UTF-8, which RFC 8785 has no form for.
func appendCanonicalString(dst []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return dst, false
	}
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}
