package server

import (
	"bytes"
	"encoding/json"

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
	return decodeJSON(body, req)
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
	var field *string
	var bit uint16
	switch name {
	case "type":
		field, bit = &r.Type, 1<<0
	case "target":
		field, bit = &r.Target, 1<<1
	case "payload_hash":
		field, bit = &r.PayloadHash, 1<<2
	case "envelope":
		field, bit = &r.Envelope, 1<<3
	case "session":
		field, bit = &r.Session, 1<<4
	case "action_id":
		field, bit = &r.ActionID, 1<<5
	case "subject":
		field, bit = &r.Subject, 1<<6
	case "salt":
		field, bit = &r.Salt, 1<<7
	case "seal":
		switch {
		case bytes.HasPrefix(body[*i:], []byte("true")):
			r.Seal, *i = true, *i+len("true")
		case bytes.HasPrefix(body[*i:], []byte("false")):
			r.Seal, *i = false, *i+len("false")
		default:
			return 0, false
		}
		return 1 << 8, true
	case "payload":
		end, ok := skipJSONValue(body, *i)
		if !ok || bytes.Equal(body[*i:end], []byte("null")) {
			return 0, false
		}
		r.Payload, *i = json.RawMessage(bytes.Clone(body[*i:end])), end
		return 1 << 9, true
	default:
		return 0, false
	}
	s, end, ok := plainJSONString(body, *i)
	if !ok {
		return 0, false
	}
	*field, *i = string(s), end
	return bit, true
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
	depth := 0
	for ; i < len(body); i++ {
		switch body[i] {
		case '"':
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
			if i >= len(body) {
				return 0, false
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i, true // the end of the enclosing object
			}
			depth--
		case ',':
			if depth == 0 {
				return i, true
			}
		case ' ', '\t', '\r', '\n':
			if depth == 0 {
				return i, true
			}
		}
		if depth == 0 && (body[i] == '"' || body[i] == '}' || body[i] == ']') {
			return i + 1, true
		}
	}
	return i, depth == 0
}

func skipSpace(body []byte, i int) int {
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n') {
		i++
	}
	return i
}
