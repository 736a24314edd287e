package event

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Canonical returns the JSON value b in RFC 8785 canonical form: b itself
// when it is canonical as it stands (nothing is parsed twice or copied);
// else, for JSON in the subset most clients send (members in any order,
// whitespace, integers of at most 15 digits, strings escaped as RFC 8785
// escapes them), the members sorted in one pass; else the full
// transform's output. All three agree byte for byte (FuzzIsCanonical).
func Canonical(b []byte) ([]byte, error) {
	if isCanonical(b) {
		return b, nil
	}
	if out, ok := sortMembers(b); ok {
		return out, nil
	}
	return jcs.Transform(b)
}

// sortMembers is RFC 8785 for the subset isCanonical judges, less the
// member order and with whitespace between tokens: it drops the whitespace
// and sorts each object's members. It answers false, and the full
// transform decides, for anything else: a fraction or exponent, a string
// escaped otherwise than RFC 8785 escapes it, a member name that is not
// printable ASCII, a name given twice, invalid JSON.
//
// Why: the full transform (gowebpki/jcs) builds a tree of strings and
// converts every name to UTF-16 to sort it; in the governed benchmark it
// made more than a quarter of the allocations of the server's handling of
// an action, and took nearly as much processor as folding it.
func sortMembers(b []byte) ([]byte, bool) {
	if !utf8.Valid(b) {
		return nil, false
	}
	c := canonSorter{canonScanner: canonScanner{b: b}, out: make([]byte, 0, len(b))}
	c.space()
	if !c.value(0) {
		return nil, false
	}
	c.space()
	return c.out, c.i == len(b)
}

// canonSorter copies a JSON value from its scanner's input to out in
// canonical form.
type canonSorter struct {
	canonScanner
	out []byte
	// members is scratch space for the objects being sorted, reused by
	// each (a nested object's members sit above its parent's).
	members []sortedMember
	scratch []byte
}

// sortedMember is one member of an object being sorted: its name, and
// where its canonical text (name, colon and value) sits in out.
type sortedMember struct {
	name       []byte
	start, end int
}

func (c *canonSorter) space() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *canonSorter) value(depth int) bool {
	if c.i >= len(c.b) || depth > maxCanonicalDepth {
		return false
	}
	switch c.b[c.i] {
	case '{':
		return c.object(depth)
	case '[':
		return c.array(depth)
	}
	// A scalar: the scanner accepts it only as RFC 8785 writes it.
	start := c.i
	if !c.canonScanner.value(depth) {
		return false
	}
	c.out = append(c.out, c.b[start:c.i]...)
	return true
}

func (c *canonSorter) array(depth int) bool {
	c.i++ // [
	c.out = append(c.out, '[')
	c.space()
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		c.out = append(c.out, ']')
		return true
	}
	for {
		c.space()
		if !c.value(depth + 1) {
			return false
		}
		c.space()
		if c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
			c.out = append(c.out, ',')
		case ']':
			c.i++
			c.out = append(c.out, ']')
			return true
		default:
			return false
		}
	}
}

func (c *canonSorter) object(depth int) bool {
	c.i++ // {
	c.out = append(c.out, '{')
	objStart := len(c.out)
	c.space()
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		c.out = append(c.out, '}')
		return true
	}
	first := len(c.members)
	defer func() { c.members = c.members[:first] }()
	sorted := true
	for {
		m, ok := c.member(depth)
		if !ok {
			return false
		}
		if n := len(c.members); n > first {
			switch bytes.Compare(c.members[n-1].name, m.name) {
			case 0:
				return false // a name given twice: the full transform's to refuse
			case 1:
				sorted = false
			}
		}
		c.members = append(c.members, m)
		c.space()
		if c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
			c.out = append(c.out, ',')
			continue
		case '}':
			c.i++
		default:
			return false
		}
		break
	}
	if !sorted && !c.sortObject(objStart, c.members[first:]) {
		return false
	}
	c.out = append(c.out, '}')
	return true
}

// member copies one member of an object, its name and value, to out.
func (c *canonSorter) member(depth int) (sortedMember, bool) {
	c.space()
	nameStart := c.i
	name, ok := c.str(true)
	if !ok {
		return sortedMember{}, false
	}
	c.space()
	if c.i >= len(c.b) || c.b[c.i] != ':' {
		return sortedMember{}, false
	}
	c.i++
	start := len(c.out)
	c.out = append(c.out, c.b[nameStart:nameStart+len(name)+2]...)
	c.out = append(c.out, ':')
	c.space()
	if !c.value(depth + 1) {
		return sortedMember{}, false
	}
	return sortedMember{name: name, start: start, end: len(c.out)}, true
}

// sortObject rewrites the members of the object written to out from
// objStart on, sorted by name. It answers false for a name given twice.
func (c *canonSorter) sortObject(objStart int, members []sortedMember) bool {
	slices.SortFunc(members, func(a, b sortedMember) int { return bytes.Compare(a.name, b.name) })
	for i := 1; i < len(members); i++ {
		if bytes.Equal(members[i-1].name, members[i].name) {
			return false
		}
	}
	c.scratch = append(c.scratch[:0], c.out[objStart:]...)
	c.out = c.out[:objStart]
	for i, m := range members {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.scratch[m.start-objStart:m.end-objStart]...)
	}
	return true
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
			if key || !c.escape() {
				return nil, false
			}
		default:
			c.i++
		}
	}
	return nil, false
}

// escape reads an escape sequence, at c.i, as RFC 8785 writes it: the
// short forms, and \u00xx in lower-case hex for the control characters
// that have none.
func (c *canonScanner) escape() bool {
	if c.i+1 >= len(c.b) {
		return false
	}
	switch c.b[c.i+1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		c.i += 2
		return true
	case 'u':
		if len(c.b)-c.i < 6 || c.b[c.i+2] != '0' || c.b[c.i+3] != '0' {
			return false
		}
		hi, lo := c.b[c.i+4], c.b[c.i+5]
		if hi != '0' && hi != '1' || !(lo >= '0' && lo <= '9' || lo >= 'a' && lo <= 'f') {
			return false
		}
		switch string(c.b[c.i+4 : c.i+6]) {
		case "08", "09", "0a", "0c", "0d":
			return false
		}
		c.i += 6
		return true
	}
	return false
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
