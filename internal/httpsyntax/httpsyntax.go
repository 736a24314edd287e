// Package httpsyntax holds the checks of HTTP/1.1's grammar that the
// project's own HTTP framing (the Go client's answer reader,
// cmd/annal-bench/loadconn's client, internal/fastpost's server path)
// shares, so that each accepts exactly the same names and values.
// net/http's copies are internal, and golang.org/x/net/http/httpguts's
// would add golang.org/x/text to the module for a ten-line loop.
package httpsyntax

// IsToken reports whether s is an RFC 9110 token (§5.6.2), as a header
// name and a method must be.
func IsToken[T string | []byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || !tokenByte[c] {
			return false
		}
	}
	return true
}

var tokenByte = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// IsFieldValue reports whether b holds no control character but tab:
// visible ASCII, spaces, tabs and bytes above ASCII (obs-text), as a
// header field's value or a status line's reason may.
func IsFieldValue[T string | []byte](b T) bool {
	for i := 0; i < len(b); i++ {
		if c := b[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// IsDigits reports whether b is one or more ASCII digits.
func IsDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
