package ring

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxIdentifierLen is the longest identifier, in bytes (§17.1). Every byte
// of a valid identifier is ASCII, so bytes and characters agree.
const MaxIdentifierLen = 256

// MaxAPIPathLen is the longest API path, in bytes (§17.2).
const MaxAPIPathLen = 2048

// IsIdentifier reports whether s is an identifier of §5.3 and §17.1: at
// most MaxIdentifierLen bytes matching ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$
// over the whole string, the $ at the very end of the text (Python's re
// also matched before a final newline, and so accepted "abc\n"). A byte
// loop rather than a regexp: the rate limiter checks an identifier on every
// action, and the regexp's backtracker was about 1% of a governed action's
// CPU. FuzzValidIdentifier holds it to the pattern.
func IsIdentifier(s string) bool {
	if len(s) == 0 || len(s) > MaxIdentifierLen || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// alnum reports whether c is an ASCII letter or digit.
func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// ValidIdentifier checks an agent, action or session identifier (§5.3,
// §17.1): it MUST match ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$ over the
// whole string and be at most 256 bytes. A trailing newline, a NUL, spaces
// and non-ASCII look-alikes (such as a Cyrillic "а" or a fullwidth digit)
// are refused. The error wraps ErrInvalidValue.
func ValidIdentifier(s string) error {
	if len(s) > MaxIdentifierLen {
		return fmt.Errorf("identifier %s: %w: longer than %d bytes (§17.1)", quote(s), ErrInvalidValue, MaxIdentifierLen)
	}
	if !IsIdentifier(s) {
		return fmt.Errorf("identifier %s: %w: must be ASCII letters and digits, with '.', '_', ':' or '-' only between them (§17.1)", quote(s), ErrInvalidValue)
	}
	return nil
}

// ValidAPIPath checks an execute or undo API path (§17.2): it MUST be
// non-empty and at most 2048 bytes. Annal also refuses invalid UTF-8 and
// control and format characters (C0, DEL and C1, which include newline, tab,
// NUL and ESC; Unicode format characters such as the bidirectional override
// U+202E; and the line and paragraph separators U+2028 and U+2029). The
// specification is silent on them, but an API path is shown to the
// person who answers a hold and is written in logs: a newline could forge a
// line in a log or a terminal, an escape sequence could repaint a terminal, a bidirectional override
// could make the path read as another,
// a NUL truncates the path for any C consumer, and invalid UTF-8 would be
// silently replaced when the path is written as JSON, so the logged path
// would not be the one checked. No legitimate path needs them. The error
// wraps ErrInvalidValue.
func ValidAPIPath(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("API path: %w: must not be empty (§17.2)", ErrInvalidValue)
	case len(s) > MaxAPIPathLen:
		return fmt.Errorf("API path %s: %w: longer than %d bytes (§17.2)", quote(s), ErrInvalidValue, MaxAPIPathLen)
	}
	return checkText("API path", s)
}

// checkText refuses invalid UTF-8, and control, format and line or paragraph
// separator characters, in s.
func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %s: %w: not valid UTF-8", what, quote(s), ErrInvalidValue)
	}
	for i, r := range s {
		if controlOrFormat(r) {
			return fmt.Errorf("%s %s: %w: control or format character %U at byte %d", what, quote(s), ErrInvalidValue, r, i)
		}
	}
	return nil
}

// controlOrFormat reports whether r is a control, format, line separator
// or paragraph separator character.
func controlOrFormat(r rune) bool {
	if r < utf8.RuneSelf {
		// ASCII's only such characters are the C0 controls and DEL (Cf, Zl
		// and Zp hold none of it): paths and names are mostly ASCII, and
		// unicode.In walks its tables for every rune.
		return r < 0x20 || r == 0x7f
	}
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// quote returns s quoted for an error message, cut to its first 64 bytes so
// that an error never echoes a huge input.
func quote(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:max], len(s))
}
