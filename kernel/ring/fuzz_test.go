package ring

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// pythonishRE is §17.1's pattern with \z; a valid identifier must match it
// entirely.
var pythonishRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$`)

func FuzzValidIdentifier(f *testing.F) {
	for _, s := range []string{"a", "abc\n", "did:annal:x", "a..b", "", "\x00", "а", strings.Repeat("a", 256), strings.Repeat("a", 257), "a-", "a\r\n", "-a", ".", "a.b", "a_", "A:9", "a b", "ab\x7f", "a\u00e9b", "0", "a:b-c_d.e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		valid := ValidIdentifier(s) == nil
		if want := len(s) <= MaxIdentifierLen && pythonishRE.MatchString(s); valid != want {
			t.Fatalf("ValidIdentifier(%q) valid=%v, the pattern and length say %v", s, valid, want)
		}
		if valid != IsIdentifier(s) {
			t.Fatalf("ValidIdentifier(%q) and IsIdentifier disagree", s)
		}
		if !valid {
			return
		}
		if strings.ContainsAny(s, "\n\r\x00 ") {
			t.Fatalf("valid identifier %q contains a newline, NUL or space", s)
		}
		if len(s) == 0 || len(s) > MaxIdentifierLen {
			t.Fatalf("valid identifier of %d bytes", len(s))
		}
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				t.Fatalf("valid identifier %q has a non-ASCII byte", s)
			}
		}
		if !pythonishRE.MatchString(s) {
			t.Fatalf("valid identifier %q does not match §17.1", s)
		}
	})
}

func FuzzParseDescriptor(f *testing.F) {
	for _, s := range []string{
		goodJSON,
		`{"action_id":"a","name":"n","execute_api":"/x","reversibility":"NONE","is_read_only":true,"is_admin":false}`,
		`{"action_id":"a","action_id":"b"}`,
		`{"is_admin":"true"}`,
		`{"undo_window_seconds":1e400}`,
		`{"name":"\ud800"}`,
		`[`, `{`, `"\`, `{"name":"\u`, `null`, ``,
		strings.Replace(goodJSON, `"is_admin":false`, `"is_admin":false,"IS_ADMIN":true`, 1),
		strings.Replace(goodJSON, `"reversibility"`, `"reverſibility"`, 1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDescriptor(data)
		if err != nil {
			return
		}
		var members map[string]json.RawMessage // exact keys
		if err := json.Unmarshal(data, &members); err != nil {
			t.Fatalf("ParseDescriptor accepted %q, which is not an object: %v", data, err)
		}
		for name := range members {
			if _, ok := descriptorFields[name]; !ok {
				t.Fatalf("ParseDescriptor accepted %q with the member %q", data, name)
			}
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted descriptor does not validate: %v", err)
		}
		// An accepted descriptor re-encodes to JSON that parses to the
		// same descriptor.
		_, d2 := roundTrip(t, d)
		if d.RequiredRing() != d2.RequiredRing() || !d.RequiredRing().Valid() {
			t.Fatalf("required ring changed or invalid: %v, %v", d.RequiredRing(), d2.RequiredRing())
		}
	})
}

func FuzzNetworkDestination(f *testing.F) {
	for _, s := range [][2]string{
		{"a.example.com", "*.example.com"},
		{"example.com.evil.net", "*.example.com"},
		{"evilexample.com", "*.example.com"},
		{"[::1]:443", "[::1]"},
		{"127.1", "127.0.0.1"},
		{"user@a.com", "a.com"},
		{"A.COM:80", "a.com:80"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, dest, entry string) {
		d, err := ParseDestination(dest)
		if err != nil {
			return
		}
		s := d.String()
		if strings.ContainsAny(s, "/@ \t\r\n\x00?#\\") || strings.Contains(s, "://") {
			t.Fatalf("accepted %q as %q", dest, s)
		}
		if !strings.EqualFold(s, dest) && !d.IP {
			t.Fatalf("%q canonicalised to %q beyond case", dest, s)
		}
		// Parsing is idempotent.
		d2, err := ParseDestination(s)
		if err != nil || d2 != d {
			t.Fatalf("re-parsing %q: %+v, %v; want %+v", s, d2, err, d)
		}
		if !MatchAllowlist([]string{entry}, d) {
			return
		}
		if ParseAllowEntry(entry) != nil {
			t.Fatalf("malformed entry %q matched %q", entry, dest)
		}
		host, _, _ := strings.Cut(strings.ToLower(entry), ":")
		if strings.HasPrefix(entry, "[") {
			return // IPv6 entries compare by address, checked below in canonical form
		}
		if suffix, ok := strings.CutPrefix(host, "*."); ok {
			if d.IP || !strings.HasSuffix(d.Host, "."+suffix) {
				t.Fatalf("wildcard %q matched %q", entry, dest)
			}
		} else if d.Host != host {
			t.Fatalf("entry %q matched %q", entry, dest)
		}
	})
}

// BenchmarkIdentifier compares IsIdentifier with the regexp it replaced, on
// an agent id of the usual length.
func BenchmarkIdentifier(b *testing.B) {
	const id = "agent-7f3c2a9e-41d2-4c1b-9a7e-0d5b8c6e2f10"
	b.Run("IsIdentifier", func(b *testing.B) {
		for b.Loop() {
			if !IsIdentifier(id) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			if !pythonishRE.MatchString(id) {
				b.Fatal("refused")
			}
		}
	})
}
