package ring

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDestination(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // canonical form, "" when refused
	}{
		{"api.example.com", "api.example.com"},
		{"API.Example.COM:443", "api.example.com:443"},
		{"localhost", "localhost"},
		{"10.0.0.1", "10.0.0.1"},
		{"10.0.0.1:8080", "10.0.0.1:8080"},
		{"[2001:db8::1]", "[2001:db8::1]"},
		{"[2001:DB8:0::1]:443", "[2001:db8::1]:443"},
		{"xn--80ak6aa92e.com", "xn--80ak6aa92e.com"},
		{"a-b.c", "a-b.c"},
		{"", ""},
		{"https://api.example.com", ""},
		{"api.example.com/path", ""},
		{"user@api.example.com", ""},
		{"user:pass@api.example.com", ""},
		{"api.example.com:443/x", ""},
		{"api.example.com?x", ""},
		{"api.example.com ", ""},
		{" api.example.com", ""},
		{"api. example.com", ""},
		{"api.example.com\n", ""},
		{"api.example.com.", ""},
		{".example.com", ""},
		{"a..b", ""},
		{"-a.com", ""},
		{"a-.com", ""},
		{"a_b.com", ""},
		{"*.example.com", ""},
		{"\u0430pi.example.com", ""}, // Cyrillic а
		{"api.example.com:", ""},
		{"api.example.com:0", ""},
		{"api.example.com:65536", ""},
		{"api.example.com:0443", ""},
		{"api.example.com:+443", ""},
		{"api.example.com:443:1", ""},
		{"127.1", ""},
		{"0x7f.0.0.1", ""},
		{"2130706433", ""},
		{"010.0.0.1", ""},
		{"256.0.0.1", ""},
		{"::1", ""},
		{"[::1", ""},
		{"[fe80::1%eth0]", ""},
		{"[10.0.0.1]", ""},
		{"[::1]443", ""},
		{"[::1]:", ""},
		{strings.Repeat("a", 64) + ".com", ""},
		{strings.Repeat("a.", 130) + "com", ""},
	} {
		d, err := ParseDestination(tc.in)
		got := ""
		if err == nil {
			got = d.String()
		} else if !errors.Is(err, ErrInvalidValue) {
			t.Errorf("ParseDestination(%q) error %v does not wrap ErrInvalidValue", tc.in, err)
		}
		if got != tc.want {
			t.Errorf("ParseDestination(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestAttack_AllowlistWildcard: "*.example.com" matches subdomains only.
func TestAttack_AllowlistWildcard(t *testing.T) {
	list := []string{"*.example.com", "exact.org:443", "10.0.0.1", "[2001:db8::1]"}
	for _, tc := range []struct {
		dest string
		ok   bool
	}{
		{"a.example.com", true},
		{"A.EXAMPLE.COM", true},
		{"a.b.example.com:8443", true},
		{"example.com", false},
		{"example.com.evil.net", false},
		{"evilexample.com", false},
		{"a.example.com.evil.net", false},
		{"aexample.com", false},
		{"exact.org:443", true},
		{"EXACT.org:443", true},
		{"exact.org", false},
		{"exact.org:444", false},
		{"sub.exact.org:443", false},
		{"10.0.0.1:22", true},
		{"10.0.0.10", false},
		{"[2001:db8:0:0::1]:443", true},
		{"[2001:db8::2]", false},
	} {
		d, err := ParseDestination(tc.dest)
		if err != nil {
			t.Fatalf("ParseDestination(%q): %v", tc.dest, err)
		}
		if got := MatchAllowlist(list, d); got != tc.ok {
			t.Errorf("MatchAllowlist(%q) = %v, want %v", tc.dest, got, tc.ok)
		}
	}
	for _, e := range append(list, "a.b:443", "[::1]:8080") {
		if err := ParseAllowEntry(e); err != nil {
			t.Errorf("ParseAllowEntry(%q): %v", e, err)
		}
	}
	// Malformed entries match nothing, however permissive they look.
	for _, e := range []string{"*", "*.*", "**.example.com", "*example.com", ".example.com", "*.", "*.0.0.1", "*.10.0.0.1", "https://*.example.com", "https://a.com", "*.example.com/"} {
		if err := ParseAllowEntry(e); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("ParseAllowEntry(%q) = %v, want ErrInvalidValue", e, err)
		}
		for _, dest := range []string{"a.example.com", "example.com", "10.0.0.1"} {
			d, _ := ParseDestination(dest)
			if MatchAllowlist([]string{e}, d) {
				t.Errorf("malformed entry %q matched %s", e, dest)
			}
		}
	}
	if MatchAllowlist(nil, Destination{Host: "a.com"}) {
		t.Error("an empty allowlist matched")
	}
}
