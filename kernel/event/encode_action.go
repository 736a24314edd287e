package event

import (
	"strconv"
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
	if e.Kind != KindAction || e.Action == nil || e.Decision == nil || e.Hold != nil || e.Signed != nil || e.Action.Sealed != nil {
		return dst, false
	}
	a, d := e.Action, e.Decision
	if len(a.Payload) > 0 && !isCanonical(a.Payload) {
		return dst, false
	}
	ok := true
	str := func(s string) {
		if ok {
			dst, ok = appendCanonicalString(dst, s)
		}
	}
	dst = append(dst, `{"action":{`...)
	comma := false
	member := func(name string) {
		if comma {
			dst = append(dst, ',')
		}
		comma = true
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":`...)
	}
	if a.Envelope != "" {
		member("envelope")
		str(a.Envelope)
	}
	if len(a.Payload) > 0 {
		member("payload")
		dst = append(dst, a.Payload...)
	}
	if a.PayloadHash != "" {
		member("payload_hash")
		str(a.PayloadHash)
	}
	if r := a.Resources; r != nil {
		member("resources")
		dst = append(dst, '{')
		inner := false
		list := func(name string, l []string) {
			if len(l) == 0 {
				return
			}
			if inner {
				dst = append(dst, ',')
			}
			inner = true
			dst = append(dst, '"')
			dst = append(dst, name...)
			dst = append(dst, `":[`...)
			for i, s := range l {
				if i > 0 {
					dst = append(dst, ',')
				}
				str(s)
			}
			dst = append(dst, ']')
		}
		list("fs_read", r.FilesystemRead)
		list("fs_write", r.FilesystemWrite)
		list("network", r.Network)
		if r.Subprocess {
			if inner {
				dst = append(dst, ',')
			}
			inner = true
			dst = append(dst, `"subprocess":true`...)
		}
		if r.Tools != 0 {
			if inner {
				dst = append(dst, ',')
			}
			dst = append(dst, `"tools":`...)
			dst = strconv.AppendUint(dst, r.Tools, 10)
		}
		dst = append(dst, '}')
	}
	member("target")
	str(a.Target)
	member("type")
	str(string(a.Type))
	dst = append(dst, `},"actor":`...)
	str(e.Actor)
	dst = append(dst, `,"decision":{"cost":`...)
	dst = strconv.AppendUint(dst, d.Cost, 10)
	dst = append(dst, `,"outcome":`...)
	str(d.Outcome)
	dst = append(dst, `,"reserved":`...)
	dst = strconv.AppendUint(dst, d.Reserved, 10)
	dst = append(dst, `,"settled":`...)
	dst = strconv.AppendUint(dst, d.Settled, 10)
	dst = append(dst, `},"id":`...)
	str(e.ID)
	dst = append(dst, `,"kind":"action"`...)
	if e.Session != "" {
		dst = append(dst, `,"session":`...)
		str(e.Session)
	}
	dst = append(dst, `,"time":`...)
	str(e.Time.String())
	dst = append(dst, `,"v":`...)
	dst = strconv.AppendInt(dst, int64(e.V), 10)
	dst = append(dst, '}')
	return dst, ok
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
