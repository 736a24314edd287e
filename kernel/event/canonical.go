package event

import (
	"bytes"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Canonical returns the JSON value b in RFC 8785 canonical form: b itself
// when it is canonical as it stands (what most clients send, so nothing is
// parsed twice or copied), else the full transform's output.
func Canonical(b []byte) ([]byte, error) {
	if isCanonical(b) {
		return b, nil
	}
	return jcs.Transform(b)
}

// isCanonical reports whether b is, for certain, RFC 8785 canonical JSON,
// judging only the subset Encode's own output falls in when its structs
// list their fields in member order: no whitespace, object members with
// ASCII names in strictly increasing order, integers of at most 15 digits,
// strings escaped exactly as RFC 8785 escapes them. Anything else — a
// fraction, an exponent, a non-ASCII or escaped member name, \u2028 as Go
// escapes it — answers false, and Encode then canonicalises with the full
// implementation. It never answers true for bytes RFC 8785 would change
// (FuzzIsCanonical compares the two).
func isCanonical(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	c := canonScanner{b: b}
	return c.value(0) && c.i == len(b)
}

// maxCanonicalDepth bounds the nesting the scanner follows.
const maxCanonicalDepth = MaxJSONDepth + 4

type canonScanner struct {
	b []byte
	i int
}

func (c *canonScanner) value(depth int) bool {
	if c.i >= len(c.b) || depth > maxCanonicalDepth {
		return false
	}
	switch ch := c.b[c.i]; {
	case ch == '{':
		return c.object(depth)
	case ch == '[':
		return c.array(depth)
	case ch == '"':
		_, ok := c.str(false)
		return ok
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	case ch == '-' || ch >= '0' && ch <= '9':
		return c.number()
	}
	return false
}

func (c *canonScanner) literal(lit string) bool {
	if !bytes.HasPrefix(c.b[c.i:], []byte(lit)) {
		return false
	}
	c.i += len(lit)
	return true
}

func (c *canonScanner) object(depth int) bool {
	c.i++ // {
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return true
	}
	var prev []byte
	for {
		key, ok := c.str(true)
		if !ok || prev != nil && bytes.Compare(prev, key) >= 0 {
			return false
		}
		prev = key
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return false
		}
		c.i++
		if !c.value(depth+1) || c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case '}':
			c.i++
			return true
		default:
			return false
		}
	}
}

func (c *canonScanner) array(depth int) bool {
	c.i++ // [
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return true
	}
	for {
		if !c.value(depth+1) || c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case ']':
			c.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string and returns its raw contents. A member name (key) must
// be printable ASCII without escapes, so that byte order is RFC 8785's
// UTF-16 order.
func (c *canonScanner) str(key bool) ([]byte, bool) {
	if c.i >= len(c.b) || c.b[c.i] != '"' {
		return nil, false
	}
	c.i++
	start := c.i
	for c.i < len(c.b) {
		ch := c.b[c.i]
		switch {
		case ch == '"':
			s := c.b[start:c.i]
			c.i++
			return s, true
		case ch < 0x20:
			return nil, false
		case ch >= 0x80:
			if key {
				return nil, false
			}
			c.i++
		case ch == '\\':
			if key || c.i+1 >= len(c.b) {
				return nil, false
			}
			switch c.b[c.i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				c.i += 2
			case 'u':
				// RFC 8785 writes \u00xx, lower-case, for the control
				// characters that have no short form, and nothing else.
				if len(c.b)-c.i < 6 || c.b[c.i+2] != '0' || c.b[c.i+3] != '0' {
					return nil, false
				}
				hi, lo := c.b[c.i+4], c.b[c.i+5]
				if hi != '0' && hi != '1' || !(lo >= '0' && lo <= '9' || lo >= 'a' && lo <= 'f') {
					return nil, false
				}
				switch string(c.b[c.i+4 : c.i+6]) {
				case "08", "09", "0a", "0c", "0d":
					return nil, false
				}
				c.i += 6
			default:
				return nil, false
			}
		default:
			c.i++
		}
	}
	return nil, false
}

// number accepts an integer of 1 to 15 digits, without a leading zero or
// "-0": its RFC 8785 form is itself.
func (c *canonScanner) number() bool {
	start := c.i
	if c.b[c.i] == '-' {
		c.i++
	}
	digits := c.i
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		c.i++
	}
	n := c.i - digits
	switch {
	case n == 0 || n > 15:
		return false
	case c.b[digits] == '0' && (n > 1 || digits > start):
		return false
	case c.i < len(c.b) && (c.b[c.i] == '.' || c.b[c.i] == 'e' || c.b[c.i] == 'E'):
		return false
	}
	return true
}
