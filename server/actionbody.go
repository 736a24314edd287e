package server

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/strictjson"
)

// decodeAction reads the body of POST /v1/actions into req as decodeJSON
// does (strictjson.Decode), and reads the plain form agents send itself:
// one object whose members are named exactly, each once, among type,
// target, payload, payload_hash, envelope, session, action_id, subject,
// salt and seal, with strings free of escapes. Anything else (resources, an
// escape, null, a member named otherwise) goes to strictjson.Decode, as
// before. The body passes strictjson.Check either way: the payload is
// checked as strictly as before. FuzzDecodeAction holds the two readings to
// the same request and the same refusals.
//
// Why: the reflection of the JSON library took 4% of annald's CPU at 512
// governed agents, for the few members of an action.
func decodeAction(body []byte, req *api.ActionRequest) error {
	if strictjson.Check(body) == nil {
		var plain api.ActionRequest
		if plainAction(body, &plain) {
			*req = plain
			return nil
		}
	}
	// decodeJSON's target goes to the heap (reflection): one of its own,
	// made only on this path, keeps the caller's on its stack.
	general := new(api.ActionRequest)
	err := decodeJSON(body, general)
	*req = *general
	return err
}

// plainAction reads body, which passed strictjson.Check, into r if it is
// in decodeAction's plain form.
func plainAction(body []byte, r *api.ActionRequest) bool {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return skipSpace(body, i+1) == len(body)
	}
	var seen uint16
	for {
		name, end, ok := plainJSONString(body, i)
		if !ok {
			return false
		}
		i = skipSpace(body, end)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = skipSpace(body, i+1)
		bit, ok := actionMember(r, string(name), body, &i)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		i = skipSpace(body, i)
		switch {
		case i < len(body) && body[i] == ',':
			i = skipSpace(body, i+1)
		case i < len(body) && body[i] == '}':
			return skipSpace(body, i+1) == len(body)
		default:
			return false
		}
	}
}

// actionMember reads the value at body[*i] into the field of r named
// name, moving *i past it, and returns the field's own bit; false for a
// name or a value outside the plain form.
func actionMember(r *api.ActionRequest, name string, body []byte, i *int) (uint16, bool) {
	switch name {
	case "seal":
		return 1 << 0, plainBool(body, i, &r.Seal)
	case "payload":
		end, ok := skipJSONValue(body, *i)
		if !ok || bytes.Equal(body[*i:end], []byte("null")) {
			return 0, false
		}
		r.Payload, *i = json.RawMessage(bytes.Clone(body[*i:end])), end
		return 1 << 1, true
	}
	field, bit := actionString(r, name)
	if field == nil {
		return 0, false
	}
	s, end, ok := plainJSONString(body, *i)
	if !ok {
		return 0, false
	}
	*field, *i = string(s), end
	return bit, true
}

// actionString is the string field of r named name, and its bit; nil for
// a name that is not one.
func actionString(r *api.ActionRequest, name string) (*string, uint16) {
	switch name {
	case "type":
		return &r.Type, 1 << 2
	case "target":
		return &r.Target, 1 << 3
	case "payload_hash":
		return &r.PayloadHash, 1 << 4
	case "envelope":
		return &r.Envelope, 1 << 5
	case "session":
		return &r.Session, 1 << 6
	case "action_id":
		return &r.ActionID, 1 << 7
	case "subject":
		return &r.Subject, 1 << 8
	case "salt":
		return &r.Salt, 1 << 9
	}
	return nil, 0
}

// plainBool reads the literal true or false at body[*i] into b, moving
// *i past it.
func plainBool(body []byte, i *int, b *bool) bool {
	for _, lit := range []string{"true", "false"} {
		if bytes.HasPrefix(body[*i:], []byte(lit)) {
			*b, *i = lit == "true", *i+len(lit)
			return true
		}
	}
	return false
}

// plainJSONString is the string at body[i] if it holds no escape: its
// bytes, and the index after its closing quote.
func plainJSONString(body []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(body) || body[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(body); j++ {
		switch body[j] {
		case '"':
			return body[i+1 : j], j + 1, true
		case '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipJSONValue returns the index after the value at body[i], in JSON
// that passed strictjson.Check: strings are whole, brackets balance.
func skipJSONValue(body []byte, i int) (int, bool) {
	if i >= len(body) {
		return 0, false
	}
	switch body[i] {
	case '"':
		return skipJSONString(body, i)
	case '{', '[':
		return skipJSONContainer(body, i)
	}
	for i < len(body) && strings.IndexByte(",}] \t\r\n", body[i]) < 0 {
		i++ // a number or a literal
	}
	return i, true
}

// skipJSONContainer returns the index after the object or array that
// starts at body[i].
func skipJSONContainer(body []byte, i int) (int, bool) {
	depth := 0
	for i < len(body) {
		switch body[i] {
		case '"':
			end, ok := skipJSONString(body, i)
			if !ok {
				return 0, false
			}
			i = end
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
		i++
	}
	return 0, false
}

// skipJSONString returns the index after the string that starts at
// body[i], escapes and all.
func skipJSONString(body []byte, i int) (int, bool) {
	for i++; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

func skipSpace(body []byte, i int) int {
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n') {
		i++
	}
	return i
}
