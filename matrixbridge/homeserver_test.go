package matrixbridge

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/klogtest"
)

func TestMain(m *testing.M) { klogtest.Main(m) }

// homeserver is the Dendrite of .ci/services: its client API and the
// shared secret that registers users.
type homeserver struct {
	url, secret string
}

// needHomeserver returns the homeserver of ANNAL_TEST_MATRIX_URL, and skips
// the test without one (fails it with ANNAL_REQUIRE_SERVICES=1).
func needHomeserver(t *testing.T) homeserver {
	t.Helper()
	hs := homeserver{url: os.Getenv("ANNAL_TEST_MATRIX_URL"), secret: os.Getenv("ANNAL_TEST_MATRIX_SHARED_SECRET")}
	if hs.url == "" || hs.secret == "" {
		msg := "no Matrix homeserver: .ci/services start DIR, then . DIR/env (ANNAL_TEST_MATRIX_URL, ANNAL_TEST_MATRIX_SHARED_SECRET)"
		if os.Getenv("ANNAL_REQUIRE_SERVICES") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return hs
}

// register makes a new user, named name and a random suffix (tests share
// the homeserver), with the shared-secret registration of the Synapse
// admin API that Dendrite serves, and returns a client logged in as it.
func (hs homeserver) register(t *testing.T, name string) *mautrix.Client {
	t.Helper()
	c, _ := hs.registerWithPassword(t, name)
	return c
}

// registerWithPassword is register, and the user's password.
func (hs homeserver) registerWithPassword(t *testing.T, name string) (*mautrix.Client, string) {
	t.Helper()
	var suffix [4]byte
	rand.Read(suffix[:])
	user := fmt.Sprintf("%s-%s", name, hex.EncodeToString(suffix[:]))
	password := "password-" + hex.EncodeToString(suffix[:])
	endpoint := hs.url + "/_synapse/admin/v1/register"
	var nonce struct {
		Nonce string `json:"nonce"`
	}
	getJSON(t, http.MethodGet, endpoint, nil, &nonce)
	mac := hmac.New(sha1.New, []byte(hs.secret))
	mac.Write([]byte(nonce.Nonce + "\x00" + user + "\x00" + password + "\x00notadmin"))
	var reg struct {
		UserID      id.UserID `json:"user_id"`
		AccessToken string    `json:"access_token"`
	}
	getJSON(t, http.MethodPost, endpoint, map[string]any{"nonce": nonce.Nonce, "username": user, "password": password,
		"admin": false, "mac": hex.EncodeToString(mac.Sum(nil))}, &reg)
	c, err := mautrix.NewClient(hs.url, reg.UserID, reg.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	c.Log = zerolog.Nop()
	return c, password
}

func getJSON(t *testing.T, method, url string, body, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s: %s", method, url, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
}

// room is a room the test's people talk in, and what the bridge posted
// there, read as one of them.
type room struct {
	id     id.RoomID
	reader *mautrix.Client
	bot    id.UserID
	used   map[id.EventID]bool // posts a wait already returned
}

// newRoom has owner create a private room and invite the others, who join.
func newRoom(t *testing.T, owner *mautrix.Client, bot id.UserID, others ...*mautrix.Client) *room {
	t.Helper()
	ctx := context.Background()
	invite := []id.UserID{bot}
	for _, o := range others {
		invite = append(invite, o.UserID)
	}
	resp, err := owner.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "annal overseers", Invite: invite})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range others {
		if _, err := o.JoinRoomByID(ctx, resp.RoomID); err != nil {
			t.Fatal(err)
		}
	}
	return &room{id: resp.RoomID, reader: owner, bot: bot, used: map[id.EventID]bool{}}
}

// say posts a text message as c; replyTo, if set, makes it a reply.
func (r *room) say(t *testing.T, c *mautrix.Client, text string, replyTo id.EventID) {
	t.Helper()
	content := &event.MessageEventContent{MsgType: event.MsgText, Body: text}
	if replyTo != "" {
		content.RelatesTo = &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: replyTo}}
	}
	if _, err := c.SendMessageEvent(context.Background(), r.id, event.EventMessage, content); err != nil {
		t.Fatal(err)
	}
}

// waitPost waits for a post of the bot, not returned before, whose text
// holds every one of parts, and returns it.
func (r *room) waitPost(t *testing.T, parts ...string) *event.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last []string
	for time.Now().Before(deadline) {
		msgs, err := r.reader.Messages(context.Background(), r.id, "", "", mautrix.DirectionBackward, nil, 50)
		if err != nil {
			t.Fatal(err)
		}
		last = last[:0]
		for i := len(msgs.Chunk) - 1; i >= 0; i-- { // oldest first
			evt := msgs.Chunk[i]
			if evt.Sender != r.bot || evt.Type != event.EventMessage || r.used[evt.ID] {
				continue
			}
			_ = evt.Content.ParseRaw(evt.Type)
			body := evt.Content.AsMessage().Body
			last = append(last, body)
			if containsAll(body, parts) {
				r.used[evt.ID] = true
				return evt
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the bridge posted nothing holding %q; its posts:\n%s", parts, strings.Join(last, "\n---\n"))
	return nil
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// startBridge writes a configuration mapping each Matrix user of humans to
// the Annal credential given, and runs a bridge on it in the room until
// the test ends; it returns once the bridge said it started.
func startBridge(t *testing.T, hs homeserver, bot *mautrix.Client, r *room, serverURL, watchCredential string, humans map[id.UserID]string) {
	t.Helper()
	dir := t.TempDir()
	users := map[string]MappedUser{}
	for u, cred := range humans {
		file := strings.NewReplacer("@", "", ":", "_").Replace(string(u)) + ".cred"
		writeFile(t, filepath.Join(dir, file), cred)
		users[string(u)] = MappedUser{CredentialFile: file}
	}
	writeFile(t, filepath.Join(dir, "bot.token"), bot.AccessToken)
	raw, err := json.Marshal(map[string]any{"homeserver": hs.url, "user_id": bot.UserID, "access_token_file": "bot.token",
		"room": r.id, "users": users, "poll_interval": "100ms", "alert_interval": "200ms", "confirm_within": "1m"})
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
	r.waitPost(t, "Annal bridge started")
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLoginGivesTheBotAToken: annal matrix login's token is the account's.
func TestLoginGivesTheBotAToken(t *testing.T) {
	hs := needHomeserver(t)
	bot, password := hs.registerWithPassword(t, "annal-bot")
	token, err := Login(context.Background(), hs.url, string(bot.UserID), password)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mautrix.NewClient(hs.url, bot.UserID, token)
	if err != nil {
		t.Fatal(err)
	}
	if who, err := c.Whoami(context.Background()); err != nil || who.UserID != bot.UserID {
		t.Fatalf("the token is %+v's (%v), want %s's", who, err, bot.UserID)
	}
	if _, err := Login(context.Background(), hs.url, string(bot.UserID), "wrong"); err == nil {
		t.Fatal("a wrong password logged in")
	}
}
