package ring

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDescriptorSize is the largest JSON action descriptor ParseDescriptor
// reads, in bytes.
const MaxDescriptorSize = 16 << 10

// descriptorFields lists the members of a descriptor's JSON object and
// whether each is required. The flags that decide the required ring
// (reversibility, is_read_only, is_admin) MUST be stated: a missing is_admin
// read as false would lower the ring an action requires. undo_window_seconds
// defaults to 0 (§5.1); undo_api and compensation_method may be absent or
// null.
var descriptorFields = map[string]bool{
	"action_id":           true,
	"name":                true,
	"execute_api":         true,
	"undo_api":            false,
	"reversibility":       true,
	"undo_window_seconds": false,
	"compensation_method": false,
	"is_read_only":        true,
	"is_admin":            true,
}

// ParseDescriptor reads one action descriptor from its JSON form and
// validates it. It is strict; it refuses:
//   - more than MaxDescriptorSize bytes, invalid UTF-8, and \u escapes of
//     lone UTF-16 surrogates (encoding/json would turn either into U+FFFD);
//   - anything but one JSON object, and data after it;
//   - a member not in §5.1, a member named in another case ("Action_ID",
//     which encoding/json would accept), a member given twice (encoding/json
//     keeps the last), and a missing required member (see descriptorFields);
//   - a value of the wrong JSON type, including null where null is not
//     allowed and a number with a fraction or exponent for
//     undo_window_seconds; the error names the field and wraps
//     ErrTypeMismatch (§17.3's TypeError);
//   - a descriptor that fails Validate (ErrInvalidValue, §17.3's ValueError).
func ParseDescriptor(data []byte) (Descriptor, error) {
	var d Descriptor
	if err := checkDescriptorBytes(data); err != nil {
		return d, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return d, fmt.Errorf("action descriptor: %w: malformed JSON: %v", ErrTypeMismatch, err)
	}
	if tok != json.Delim('{') {
		return d, fmt.Errorf("action descriptor: %w: must be a JSON object", ErrTypeMismatch)
	}
	seen := make(map[string]bool, len(descriptorFields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return d, fmt.Errorf("action descriptor: %w: malformed JSON: %v", ErrTypeMismatch, err)
		}
		key, _ := tok.(string) // an object key is always a string
		if _, ok := descriptorFields[key]; !ok {
			return d, fmt.Errorf("action descriptor: member %s: %w: not a field of an action descriptor (§5.1)", quote(key), ErrInvalidValue)
		}
		if seen[key] {
			return d, fmt.Errorf("action descriptor: member %s: %w: given twice", quote(key), ErrInvalidValue)
		}
		seen[key] = true
		val, err := dec.Token()
		if err != nil {
			return d, fmt.Errorf("action descriptor: %s: %w: malformed JSON: %v", key, ErrTypeMismatch, err)
		}
		if err := setField(&d, key, val); err != nil {
			return d, fmt.Errorf("action descriptor: %w", err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return d, fmt.Errorf("action descriptor: %w: malformed JSON: %v", ErrTypeMismatch, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return d, fmt.Errorf("action descriptor: %w: data after the JSON object", ErrTypeMismatch)
	}
	if err := requireMembers(seen); err != nil {
		return d, err
	}
	if err := d.Validate(); err != nil {
		return Descriptor{}, err
	}
	return d, nil
}

// checkDescriptorBytes refuses what is wrong before any JSON is read: too
// many bytes, invalid UTF-8, an escaped lone surrogate.
func checkDescriptorBytes(data []byte) error {
	if len(data) > MaxDescriptorSize {
		return fmt.Errorf("action descriptor: %w: %d bytes, more than %d", ErrInvalidValue, len(data), MaxDescriptorSize)
	}
	if !utf8.Valid(data) {
		return fmt.Errorf("action descriptor: %w: JSON is not valid UTF-8", ErrInvalidValue)
	}
	if err := checkSurrogates(data); err != nil {
		return fmt.Errorf("action descriptor: %w", err)
	}
	return nil
}

// requireMembers refuses a descriptor that lacks a required member (those
// descriptorFields marks true), naming the first in the order of §5.1.
func requireMembers(seen map[string]bool) error {
	for _, key := range []string{"action_id", "name", "execute_api", "reversibility", "is_read_only", "is_admin"} {
		if !seen[key] {
			return fmt.Errorf("action descriptor: %s: %w: required member missing (§5.1)", key, ErrInvalidValue)
		}
	}
	return nil
}

// setField stores one member's value in d, refusing a value of the wrong
// JSON type. val is a token from a json.Decoder with UseNumber: a string,
// bool, json.Number, nil or json.Delim (an object or array, which no field
// takes).
func setField(d *Descriptor, key string, val json.Token) error {
	m := member{key: key, val: val}
	switch key {
	case "action_id":
		return m.str(&d.ActionID)
	case "name":
		return m.str(&d.Name)
	case "execute_api":
		return m.str(&d.ExecuteAPI)
	case "undo_api":
		return m.optStr(&d.UndoAPI)
	case "reversibility":
		var s string
		err := m.str(&s)
		d.Reversibility = Reversibility(s)
		return err
	case "compensation_method":
		return m.optStr(&d.CompensationMethod)
	case "is_read_only":
		return m.boolean(&d.IsReadOnly)
	case "is_admin":
		return m.boolean(&d.IsAdmin)
	case "undo_window_seconds":
		return m.undoWindow(&d.UndoWindowSeconds)
	}
	return fmt.Errorf("%s: %w: not a field of an action descriptor", key, ErrInvalidValue)
}

// member is one member of a descriptor's JSON object, its value a decoder
// token; each method stores the value in a field of one kind or refuses it
// as the wrong JSON type.
type member struct {
	key string
	val json.Token
}

func (m member) mismatch(want string) error {
	return fmt.Errorf("%s: %w: got %s, want %s", m.key, ErrTypeMismatch, jsonType(m.val), want)
}

func (m member) str(dst *string) error {
	s, ok := m.val.(string)
	if !ok {
		return m.mismatch("a string")
	}
	*dst = s
	return nil
}

// optStr stores a string, or nil for null.
func (m member) optStr(dst **string) error {
	if m.val == nil {
		*dst = nil
		return nil
	}
	s, ok := m.val.(string)
	if !ok {
		return m.mismatch("a string or null")
	}
	*dst = &s
	return nil
}

func (m member) boolean(dst *bool) error {
	b, ok := m.val.(bool)
	if !ok {
		return m.mismatch("true or false")
	}
	*dst = b
	return nil
}

// undoWindow stores an integer in [0, MaxUndoWindowSeconds]; one out of
// that range, even past int64, is an invalid value, not a type mismatch.
func (m member) undoWindow(dst *int) error {
	n, ok := m.val.(json.Number)
	if !ok {
		return m.mismatch("an integer")
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	var numErr *strconv.NumError
	switch {
	case errors.As(err, &numErr) && numErr.Err == strconv.ErrRange:
		return fmt.Errorf("%s %s: %w: must be in [0, %d] (§5.3)", m.key, quote(string(n)), ErrInvalidValue, MaxUndoWindowSeconds)
	case err != nil:
		return fmt.Errorf("%s: %w: got the number %s, want an integer", m.key, ErrTypeMismatch, quote(string(n)))
	case v < 0 || v > MaxUndoWindowSeconds:
		return fmt.Errorf("%s %d: %w: must be in [0, %d] (§5.3)", m.key, v, ErrInvalidValue, MaxUndoWindowSeconds)
	}
	*dst = int(v)
	return nil
}

// jsonType names the JSON type of a decoder token.
func jsonType(t json.Token) string {
	switch v := t.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	}
	return fmt.Sprintf("%T", t)
}

// checkSurrogates refuses a \u escape of a lone UTF-16 surrogate, which
// encoding/json would quietly turn into U+FFFD. It runs before the JSON is
// known to be well formed, so it bounds every index.
func checkSurrogates(data []byte) error {
	hex := func(i int) (rune, bool) {
		if i+4 > len(data) {
			return 0, false
		}
		n, err := strconv.ParseUint(string(data[i:i+4]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		i++
		if i >= len(data) || data[i] != 'u' {
			continue
		}
		r, ok := hex(i + 1)
		if !ok {
			continue // malformed; the decoder refuses it
		}
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r < 0xdc00 && i+2 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
			if lo, ok := hex(i + 3); ok && utf16.DecodeRune(r, lo) != unicode.ReplacementChar {
				i += 6
				continue
			}
		}
		return fmt.Errorf("%w: JSON string has a lone UTF-16 surrogate \\u%04x", ErrInvalidValue, r)
	}
	return nil
}
