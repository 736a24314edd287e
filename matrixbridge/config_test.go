package matrixbridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodConfig = `{"homeserver": "http://127.0.0.1:8008", "user_id": "@annal:example.org", "access_token_file": "bot.token",
 "room": "!abc:example.org", "users": {"@alice:example.org": {"credential_file": "alice.cred"}}}`

// TestConfigIsReadStrictly: the operator's file is parsed exactly (member
// names as spelt, no unknown members), and each field's form is checked
// with an error that names it.
func TestConfigIsReadStrictly(t *testing.T) {
	if _, err := ParseConfig([]byte(goodConfig)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, err string }{
		{`"homeserver": "http://127.0.0.1:8008"`, `"homeserver": "127.0.0.1:8008"`, "homeserver"},
		{`"user_id"`, `"User_id"`, "User_id"},
		{`"user_id": "@annal:example.org"`, `"user_id": "annal"`, "user_id"},
		{`"room": "!abc:example.org"`, `"room": "#overseers:example.org"`, "not an alias"},
		{`{"@alice:example.org": {"credential_file": "alice.cred"}}`, `{}`, "no Matrix user is mapped"},
		{`"@alice:example.org"`, `"@annal:example.org"`, "the bridge's own account"},
		{`"@alice:example.org"`, `"alice"`, "not a Matrix user id"},
		{`{"credential_file": "alice.cred"}`, `{"credential_file": ""}`, "no credential_file"},
		{`"access_token_file": "bot.token"`, `"access_token_file": "bot.token", "poll_interval": "-1s"`, "poll_interval"},
		{`"access_token_file": "bot.token"`, `"access_token_file": "bot.token", "token": "x"`, "token"},
		{`"access_token_file": "bot.token"`, `"access_token_file": "bot.token", "access_token_file": "b"`, "twice"},
	} {
		raw := strings.Replace(goodConfig, tc.from, tc.to, 1)
		if _, err := ParseConfig([]byte(raw)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s → %s: %v, want an error naming %q", tc.from, tc.to, err, tc.err)
		}
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", MaxConfigBytes)+goodConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(big); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a file over %d bytes: %v", MaxConfigBytes, err)
	}
	good := filepath.Join(dir, "matrix.json")
	if err := os.WriteFile(good, []byte(goodConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.path("alice.cred"); got != filepath.Join(dir, "alice.cred") {
		t.Errorf("a relative path is read from %s, want beside the file", got)
	}
}

// FuzzParseConfig: the configuration parser never accepts a file whose
// fields fail their checks.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(goodConfig))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"users": {"@a:b": {}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParseConfig(raw)
		if err != nil {
			return
		}
		if err := c.check(); err != nil {
			t.Fatalf("accepted a configuration that fails its check: %v", err)
		}
		if !isMatrixID(c.UserID, '@') || !isMatrixID(c.Room, '!') || len(c.Users) == 0 {
			t.Fatalf("accepted %+v", c)
		}
	})
}
