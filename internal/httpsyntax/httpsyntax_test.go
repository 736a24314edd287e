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
