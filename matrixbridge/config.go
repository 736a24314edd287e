package matrixbridge

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/annal-dev/annal/internal/strictjson"
)

// MaxConfigBytes bounds the configuration file.
const MaxConfigBytes = 64 << 10

// Defaults of the intervals a configuration leaves out.
const (
	DefaultPollInterval  = time.Second
	DefaultAlertInterval = 15 * time.Second
	DefaultConfirmWithin = 2 * time.Minute
)

// Config is the operator's configuration file (JSON, parsed strictly):
//
//	{
//	  "homeserver": "http://127.0.0.1:8008",
//	  "user_id": "@annal:example.org",
//	  "access_token_file": "bot.token",
//	  "room": "!abcdef:example.org",
//	  "users": {
//	    "@alice:example.org": {"credential_file": "alice.cred"}
//	  }
//	}
//
// Paths are relative to the file's folder. Each mapped credential MUST be
// an Annal human's: the bridge checks it at start.
type Config struct {
	Homeserver      string                `json:"homeserver"`
	UserID          string                `json:"user_id"`
	AccessTokenFile string                `json:"access_token_file"`
	Room            string                `json:"room"`
	Users           map[string]MappedUser `json:"users"`
	// PollInterval is how often pending holds are looked for,
	// AlertInterval how often the log's health is, and ConfirmWithin how
	// long a confirmation code stays good (Go durations, e.g. "2m").
	PollInterval  string `json:"poll_interval,omitempty"`
	AlertInterval string `json:"alert_interval,omitempty"`
	ConfirmWithin string `json:"confirm_within,omitempty"`

	dir string // the file's folder, for relative paths
}

// MappedUser is the Annal human a Matrix user acts as.
type MappedUser struct {
	CredentialFile string `json:"credential_file"`
}

// LoadConfig reads and checks a configuration file.
func LoadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(raw) > MaxConfigBytes {
		return nil, fmt.Errorf("%s: more than %d bytes", path, MaxConfigBytes)
	}
	c, err := ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.dir = filepath.Dir(path)
	return c, nil
}

// ParseConfig parses a configuration strictly (exact member names, no
// unknown or duplicate members) and checks each field's form.
func ParseConfig(raw []byte) (*Config, error) {
	var c Config
	if err := strictjson.Decode(raw, &c); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) check() error {
	if !strings.HasPrefix(c.Homeserver, "http://") && !strings.HasPrefix(c.Homeserver, "https://") {
		return fmt.Errorf("homeserver %q: an http:// or https:// URL", c.Homeserver)
	}
	if !isMatrixID(c.UserID, '@') {
		return fmt.Errorf("user_id %q: a Matrix user id, @name:server", c.UserID)
	}
	if c.AccessTokenFile == "" {
		return errors.New("access_token_file: the file holding the bot's access token")
	}
	if !isMatrixID(c.Room, '!') {
		return fmt.Errorf("room %q: a room id, !id:server (not an alias)", c.Room)
	}
	if len(c.Users) == 0 {
		return errors.New("users: no Matrix user is mapped to an Annal human, so no one could answer")
	}
	for _, u := range c.sortedUsers() {
		if !isMatrixID(u, '@') {
			return fmt.Errorf("users: %q is not a Matrix user id, @name:server", u)
		}
		if u == c.UserID {
			return fmt.Errorf("users: %s is the bridge's own account", u)
		}
		if c.Users[u].CredentialFile == "" {
			return fmt.Errorf("users: %s has no credential_file", u)
		}
	}
	for name, v := range map[string]string{"poll_interval": c.PollInterval, "alert_interval": c.AlertInterval, "confirm_within": c.ConfirmWithin} {
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return fmt.Errorf("%s %q: a positive Go duration such as \"30s\"", name, v)
		}
	}
	return nil
}

// isMatrixID says whether s has the form SIGIL localpart : server, without
// spaces or control characters.
func isMatrixID(s string, sigil byte) bool {
	if len(s) < 4 || len(s) > 255 || s[0] != sigil {
		return false
	}
	local, server, ok := strings.Cut(s[1:], ":")
	if !ok || local == "" || server == "" {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

func (c *Config) sortedUsers() []string {
	out := make([]string, 0, len(c.Users))
	for u := range c.Users {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// path resolves a path of the file against its folder.
func (c *Config) path(p string) string {
	if filepath.IsAbs(p) || c.dir == "" {
		return p
	}
	return filepath.Join(c.dir, p)
}

func (c *Config) duration(v string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	return def
}

// readSecret reads a one-line secret file.
func readSecret(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
