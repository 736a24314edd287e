package strictjson

import (
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// str reads the string whose opening quote is just before data[i], and
// returns the index just after its closing quote, and whether it holds an
// escape.
func (c *checker) str(i int) (end int, escaped bool, err error) {
	data := c.data
	for {
		// Skip eight bytes at a time while none of them is a quote, a
		// backslash, a control character or part of a multi-byte rune.
		for i+8 <= len(data) && !special8(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		for i < len(data) && plain[data[i]] {
			i++
		}
		if i >= len(data) {
			return 0, false, c.malformed(i, "in a string")
		}
		switch b := data[i]; {
		case b == '"':
			return i + 1, escaped, nil
		case b == '\\':
			escaped = true
			if i, err = c.escape(i); err != nil {
				return 0, false, err
			}
		case b < 0x20:
			return 0, false, c.malformed(i, "in a string (a control character must be escaped)")
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, errNotUTF8
			}
			i += size
		}
	}
}

// plain tells the bytes a string holds as they are: ASCII from the space
// up, but the quote and the backslash.
var plain = func() (t [256]bool) {
	for b := 0x20; b < 0x80; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// special8 tells whether any of the eight bytes of x is a quote, a
// backslash, below 0x20 or above 0x7f. It may say true for a plain byte
// above one that is special, never when none is.
func special8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((quote-ones)&^quote|(backslash-ones)&^backslash|(x-ones*0x20)|x)&highs != 0
}

// escape reads the escape whose backslash is data[i], and returns the index
// just after it. A \u escape of a high surrogate followed by one of a low
// surrogate is read as one pair; any other \u escape of a surrogate is
// lone, and noted.
func (c *checker) escape(i int) (int, error) {
	data := c.data
	if i+1 >= len(data) {
		return 0, c.malformed(i+1, "in a string escape")
	}
	switch data[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
	default:
		return 0, c.malformed(i+1, "in a string escape")
	}
	r, bad := hex4(data, i+2)
	if bad >= 0 {
		return 0, c.malformed(bad, `in a \u escape`)
	}
	if !utf16.IsSurrogate(r) {
		return i + 6, nil
	}
	if pair(data, i+6, r) != unicode.ReplacementChar {
		return i + 12, nil
	}
	if !c.lone {
		c.lone, c.loneRune = true, r
	}
	return i + 6, nil
}

// hex4 reads the four hexadecimal digits of a \u escape at data[i:]. When
// they are not all there, it returns the index of the first byte that is
// not one, or len(data), as bad; else bad is -1.
func hex4(data []byte, i int) (r rune, bad int) {
	for j := i; j < i+4; j++ {
		if j >= len(data) {
			return 0, j
		}
		d := hexDigit(data[j])
		if d < 0 {
			return 0, j
		}
		r = r<<4 | d
	}
	return r, -1
}

// pair returns the rune that the surrogate r and the \u escape at data[i:]
// stand for together, or U+FFFD when r is not a high surrogate or no escape
// of a low surrogate follows.
func pair(data []byte, i int, r rune) rune {
	if i+1 < len(data) && data[i] == '\\' && data[i+1] == 'u' {
		if low, bad := hex4(data, i+2); bad < 0 {
			return utf16.DecodeRune(r, low)
		}
	}
	return unicode.ReplacementChar
}

func hexDigit(b byte) rune {
	switch {
	case '0' <= b && b <= '9':
		return rune(b - '0')
	case 'a' <= b && b <= 'f':
		return rune(b - 'a' + 10)
	case 'A' <= b && b <= 'F':
		return rune(b - 'A' + 10)
	}
	return -1
}

// unescape returns the text of a string's content s, which str has read,
// as encoding/json reads it: a \u escape of a lone surrogate is U+FFFD.
func unescape(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			out = append(out, s[i])
			i++
			continue
		}
		switch b := s[i+1]; b {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(s, i+2)
			i += 6
			if utf16.IsSurrogate(r) {
				if r = pair(s, i, r); r != unicode.ReplacementChar {
					i += 6
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, b)
		}
		i += 2
	}
	return out
}
