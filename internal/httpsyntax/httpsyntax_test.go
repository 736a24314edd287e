package httpsyntax

import "testing"

func TestIsToken(t *testing.T) {
	for s, want := range map[string]bool{
		"Content-Length": true, "x-a_b.c~d|e": true, "!#$%&'*+-.^_`|~09azAZ": true,
		"": false, "a b": false, "a:b": false, "a\tb": false, "caf\xc3\xa9": false, "a\x00": false,
		"(a)": false, "a,b": false, "a/b": false, "a\"b": false, "{a}": false, "a\x7f": false,
	} {
		if got := IsToken(s); got != want {
			t.Errorf("IsToken(%q) = %v, want %v", s, got, want)
		}
		if got := IsToken([]byte(s)); got != want {
			t.Errorf("IsToken([]byte(%q)) = %v, want %v", s, got, want)
		}
	}
}

func TestIsFieldValue(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "application/json": true, "a\tb c": true, "caf\xc3\xa9": true, "\xff": true,
		"a\r\nb": false, "a\x00": false, "a\x7f": false, "\x1f": false, "a\nb": false,
	} {
		if got := IsFieldValue(s); got != want {
			t.Errorf("IsFieldValue(%q) = %v, want %v", s, got, want)
		}
		if got := IsFieldValue([]byte(s)); got != want {
			t.Errorf("IsFieldValue([]byte(%q)) = %v, want %v", s, got, want)
		}
	}
}

func TestIsDigits(t *testing.T) {
	for s, want := range map[string]bool{"0": true, "0123456789": true, "": false, "1a": false, "-1": false, " 1": false, "1.0": false} {
		if got := IsDigits([]byte(s)); got != want {
			t.Errorf("IsDigits(%q) = %v, want %v", s, got, want)
		}
	}
}
