package matrixbridge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/klogtest"
	"github.com/annal-dev/annal/matrixbridge/matrixtest"
)

func TestMain(m *testing.M) { klogtest.Main(m) }

// startBridge writes a configuration mapping each Matrix user of humans to
// the Annal credential given, and runs a bridge on it in the room until
// the test ends; it returns once the bridge said it started.
func startBridge(t *testing.T, hs matrixtest.Homeserver, bot *mautrix.Client, r *matrixtest.Room, serverURL, watchCredential string, humans map[id.UserID]string) {
	t.Helper()
	dir := t.TempDir()
	users := map[string]MappedUser{}
	for u, cred := range humans {
		file := strings.NewReplacer("@", "", ":", "_").Replace(string(u)) + ".cred"
		writeFile(t, filepath.Join(dir, file), cred)
		users[string(u)] = MappedUser{CredentialFile: file}
	}
	writeFile(t, filepath.Join(dir, "bot.token"), bot.AccessToken)
	raw, err := json.Marshal(map[string]any{"homeserver": hs.URL, "user_id": bot.UserID, "access_token_file": "bot.token",
		"room": r.ID, "users": users, "poll_interval": "100ms", "alert_interval": "200ms", "confirm_within": "1m"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "matrix.json"), string(raw))
	cfg, err := LoadConfig(filepath.Join(dir, "matrix.json"))
	if err != nil {
		t.Fatal(err)
	}
	watch, err := client.New(serverURL, watchCredential)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b, err := New(ctx, cfg, Options{Watch: watch, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewClient: func(cred string) (*client.Client, error) { return client.New(serverURL, cred) }})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the bridge did not stop within 10s of its context's end")
		}
	})
	r.WaitPost(t, "Annal bridge started")
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLoginGivesTheBotAToken: annal matrix login's token is the account's.
func TestLoginGivesTheBotAToken(t *testing.T) {
	hs := matrixtest.Need(t)
	bot, password := hs.Register(t, "annal-bot")
	token, err := Login(context.Background(), hs.URL, string(bot.UserID), password)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mautrix.NewClient(hs.URL, bot.UserID, token)
	if err != nil {
		t.Fatal(err)
	}
	if who, err := c.Whoami(context.Background()); err != nil || who.UserID != bot.UserID {
		t.Fatalf("the token is %+v's (%v), want %s's", who, err, bot.UserID)
	}
	if _, err := Login(context.Background(), hs.URL, string(bot.UserID), "wrong"); err == nil {
		t.Fatal("a wrong password logged in")
	}
}

// register is a new user of the homeserver, named name and a suffix.
func register(t *testing.T, hs matrixtest.Homeserver, name string) *mautrix.Client {
	t.Helper()
	c, _ := hs.Register(t, name)
	return c
}
