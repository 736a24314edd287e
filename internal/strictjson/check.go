package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of objects and arrays in a caller's JSON.
const MaxDepth = 32

// Check checks that data is one JSON value that RFC 8785 can canonicalise
// without changing its meaning, and refuses what encoding/json would quietly
// accept or alter:
//   - invalid UTF-8, and \u escapes of lone UTF-16 surrogates
//     (encoding/json would replace either with U+FFFD),
//   - an object with two members of the same name (encoding/json keeps the last),
//   - a number that is not exactly an IEEE 754 double, such as 2^53+1
//     (RFC 8785 §3.2.2.3 would round it), or whose RFC 8785 form is not
//     exactly that double, such as 2^64 (written 18446744073709552000),
//   - nesting deeper than MaxDepth, and trailing data.
//
// Names are compared after unescaping, with a lone surrogate read as U+FFFD
// as encoding/json reads it: {"a":1,"\u0061":2} has the member "a" twice.
// Beyond that Check says nothing about member names: Decode runs it, then
// matches names exactly.
//
// When data breaks more than one rule, the error is, first, that it is not
// UTF-8; then the first of malformed syntax, a name given twice, nesting too
// deep or a number refused, as they come in data; then trailing data; and
// last a lone surrogate.
func Check(data []byte) error { return CheckDepth(data, MaxDepth) }

// CheckDepth is Check with another bound on nesting, for a document that
// carries a caller's JSON some levels down (a log entry holds a payload two
// levels below its top). The outermost object or array is at depth 0, and
// one at depth d is refused unless d < maxDepth.
func CheckDepth(data []byte, maxDepth int) error {
	c := checker{data: data, maxDepth: maxDepth}
	err := c.check()
	// The scan decodes UTF-8 only inside strings and stops at the first
	// error, so a refusal for any other reason may hide invalid UTF-8
	// further on, which must be the error said.
	if err != nil && err != errNotUTF8 && !utf8.Valid(data) {
		return errNotUTF8
	}
	return err
}

var errNotUTF8 = errors.New("JSON is not valid UTF-8")

// checker reads data once, from left to right, by the grammar of RFC 8259,
// and checks each value as it ends. It allocates only to report an error,
// to unescape a member name that holds an escape, for an object of more
// than namesOnStack members, and for a number it cannot decide on the fast
// path (see number).
type checker struct {
	data     []byte
	maxDepth int
	lone     bool // data has a \u escape of a lone surrogate, loneRune the first
	loneRune rune
}

func (c *checker) check() error {
	i, err := c.value(c.space(0), 0)
	if err != nil {
		return err
	}
	if c.space(i) < len(c.data) {
		return errors.New("JSON has data after its value")
	}
	if c.lone {
		return fmt.Errorf("JSON string has a lone UTF-16 surrogate \\u%04x", c.loneRune)
	}
	return nil
}

// value reads the value that starts at data[i], at nesting depth depth,
// and returns the index just after it.
func (c *checker) value(i, depth int) (int, error) {
	if i >= len(c.data) {
		return 0, c.malformed(i, "where a value should start")
	}
	switch b := c.data[i]; b {
	case '{', '[':
		if depth >= c.maxDepth {
			return 0, fmt.Errorf("JSON nests deeper than %d levels", c.maxDepth)
		}
		if b == '{' {
			return c.object(i+1, depth)
		}
		return c.array(i+1, depth)
	case '"':
		end, _, err := c.str(i + 1)
		return end, err
	case 't':
		return c.literal(i, "true")
	case 'f':
		return c.literal(i, "false")
	case 'n':
		return c.literal(i, "null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return c.number(i)
	}
	return 0, c.malformed(i, "where a value should start")
}

// namesOnStack is how many member names an object may have before its
// names are looked up in a map rather than compared one by one.
const namesOnStack = 16

// object reads the members of the object whose '{' is just before data[i].
func (c *checker) object(i, depth int) (int, error) {
	data := c.data
	var names memberNames
	i = c.space(i)
	if i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return 0, c.malformed(i, "where a member name should start")
		}
		end, escaped, err := c.str(i + 1)
		if err != nil {
			return 0, err
		}
		name := data[i+1 : end-1]
		if escaped {
			name = unescape(name)
		}
		if err := names.add(name); err != nil {
			return 0, err
		}
		i = c.space(end)
		if i >= len(data) || data[i] != ':' {
			return 0, c.malformed(i, "after a member name (want ':')")
		}
		if i, err = c.value(c.space(i+1), depth+1); err != nil {
			return 0, err
		}
		if i = c.space(i); i < len(data) {
			switch data[i] {
			case ',':
				i = c.space(i + 1)
				continue
			case '}':
				return i + 1, nil
			}
		}
		return 0, c.malformed(i, "after an object member (want ',' or '}')")
	}
}

// memberNames is the names of an object's members read so far, kept to
// refuse a name given twice: in an array, compared one by one, while there
// are at most namesOnStack, then in a map.
type memberNames struct {
	local [namesOnStack][]byte
	n     int // names in local
	seen  map[string]struct{}
}

// add records name, or refuses it if it was given before.
func (m *memberNames) add(name []byte) error {
	if m.seen == nil {
		for _, n := range m.local[:m.n] {
			if bytes.Equal(n, name) {
				return fmt.Errorf("JSON object has the member %q twice", name)
			}
		}
		if m.n < namesOnStack {
			m.local[m.n] = name
			m.n++
			return nil
		}
		m.seen = make(map[string]struct{}, 2*namesOnStack)
		for _, n := range m.local {
			m.seen[string(n)] = struct{}{}
		}
	}
	if _, ok := m.seen[string(name)]; ok {
		return fmt.Errorf("JSON object has the member %q twice", name)
	}
	m.seen[string(name)] = struct{}{}
	return nil
}

// array reads the elements of the array whose '[' is just before data[i].
func (c *checker) array(i, depth int) (int, error) {
	data := c.data
	i = c.space(i)
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(i, depth+1); err != nil {
			return 0, err
		}
		if i = c.space(i); i < len(data) {
			switch data[i] {
			case ',':
				i = c.space(i + 1)
				continue
			case ']':
				return i + 1, nil
			}
		}
		return 0, c.malformed(i, "after an array element (want ',' or ']')")
	}
}

func (c *checker) literal(i int, lit string) (int, error) {
	for j := 0; j < len(lit); j++ {
		if i+j >= len(c.data) || c.data[i+j] != lit[j] {
			return 0, c.malformed(i+j, "in the literal "+lit)
		}
	}
	return i + len(lit), nil
}

// space returns the index of the first byte at or after i that is not JSON
// white space: only space, tab, line feed and carriage return are.
func (c *checker) space(i int) int {
	for ; i < len(c.data); i++ {
		switch c.data[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return i
		}
	}
	return i
}

// malformed describes a syntax error at data[i].
func (c *checker) malformed(i int, where string) error {
	if i >= len(c.data) {
		return fmt.Errorf("JSON is malformed: end of input at byte %d %s", i, where)
	}
	r, _ := utf8.DecodeRune(c.data[i:])
	return fmt.Errorf("JSON is malformed: %q at byte %d %s", r, i, where)
}
