// Package matrixtest talks to the Matrix homeserver of .ci/services
// (Dendrite) for tests: it registers users with the homeserver's shared
// secret, makes rooms, posts as a person and waits for what a bot posted.
// A test without the homeserver's variables is skipped, or failed under
// ANNAL_REQUIRE_SERVICES=1.
package matrixtest

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
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Homeserver is the homeserver's client API and the shared secret that
// registers users.
type Homeserver struct {
	URL, Secret, ServerName string
}

// Need returns the homeserver of ANNAL_TEST_MATRIX_URL and
// ANNAL_TEST_MATRIX_SHARED_SECRET, and skips the test without them (fails
// it with ANNAL_REQUIRE_SERVICES=1).
func Need(t testing.TB) Homeserver {
	t.Helper()
	hs := Homeserver{URL: os.Getenv("ANNAL_TEST_MATRIX_URL"), Secret: os.Getenv("ANNAL_TEST_MATRIX_SHARED_SECRET"),
		ServerName: os.Getenv("ANNAL_TEST_MATRIX_SERVER_NAME")}
	if hs.ServerName == "" {
		hs.ServerName = "localhost"
	}
	if hs.URL == "" || hs.Secret == "" {
		msg := "no Matrix homeserver: .ci/services start DIR, then . DIR/env (ANNAL_TEST_MATRIX_URL, ANNAL_TEST_MATRIX_SHARED_SECRET)"
		if os.Getenv("ANNAL_REQUIRE_SERVICES") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return hs
}

// Register makes a new user named name and a random suffix (tests share
// the homeserver) and returns a client logged in as it, and its password.
func (hs Homeserver) Register(t testing.TB, name string) (*mautrix.Client, string) {
	t.Helper()
	var suffix [4]byte
	rand.Read(suffix[:])
	user := fmt.Sprintf("%s-%s", name, hex.EncodeToString(suffix[:]))
	password := "password-" + hex.EncodeToString(suffix[:])
	c, err := hs.register(user, password)
	if err != nil {
		t.Fatal(err)
	}
	return c, password
}

// User returns a client logged in as the user localpart with password,
// registering it first when the homeserver does not have it yet (a test
// that needs fixed names, run again on the same homeserver).
func (hs Homeserver) User(t testing.TB, localpart, password string) *mautrix.Client {
	t.Helper()
	if c, err := hs.register(localpart, password); err == nil {
		return c
	}
	c, err := mautrix.NewClient(hs.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	c.Log = zerolog.Nop()
	if _, err := c.Login(context.Background(), &mautrix.ReqLogin{Type: mautrix.AuthTypePassword, StoreCredentials: true,
		Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: localpart}, Password: password}); err != nil {
		t.Fatalf("%s is neither new nor logs in with its password: %v", localpart, err)
	}
	return c
}

// register uses the shared-secret registration of the Synapse admin API
// that Dendrite serves.
func (hs Homeserver) register(user, password string) (*mautrix.Client, error) {
	endpoint := hs.URL + "/_synapse/admin/v1/register"
	var nonce struct {
		Nonce string `json:"nonce"`
	}
	if err := call(http.MethodGet, endpoint, nil, &nonce); err != nil {
		return nil, err
	}
	mac := hmac.New(sha1.New, []byte(hs.Secret))
	mac.Write([]byte(nonce.Nonce + "\x00" + user + "\x00" + password + "\x00notadmin"))
	var reg struct {
		UserID      id.UserID `json:"user_id"`
		AccessToken string    `json:"access_token"`
	}
	if err := call(http.MethodPost, endpoint, map[string]any{"nonce": nonce.Nonce, "username": user, "password": password,
		"admin": false, "mac": hex.EncodeToString(mac.Sum(nil))}, &reg); err != nil {
		return nil, err
	}
	c, err := mautrix.NewClient(hs.URL, reg.UserID, reg.AccessToken)
	if err != nil {
		return nil, err
	}
	c.Log = zerolog.Nop()
	return c, nil
}

func call(method, url string, body, out any) error {
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, raw)
	}
	return json.Unmarshal(raw, out)
}

// Room is a room people talk in, and what a bot posted there, read as one
// of them.
type Room struct {
	ID     id.RoomID
	reader *mautrix.Client
	bot    id.UserID
	used   map[id.EventID]bool // posts a wait already returned
}

// NewRoom has owner create a private room and invite the bot and the
// others, who join.
func NewRoom(t testing.TB, owner *mautrix.Client, bot id.UserID, others ...*mautrix.Client) *Room {
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
	return &Room{ID: resp.RoomID, reader: owner, bot: bot, used: map[id.EventID]bool{}}
}

// Say posts a text message as c; replyTo, if set, makes it a reply.
func (r *Room) Say(t testing.TB, c *mautrix.Client, text string, replyTo id.EventID) {
	t.Helper()
	content := &event.MessageEventContent{MsgType: event.MsgText, Body: text}
	if replyTo != "" {
		content.RelatesTo = &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: replyTo}}
	}
	if _, err := c.SendMessageEvent(context.Background(), r.ID, event.EventMessage, content); err != nil {
		t.Fatal(err)
	}
}

// WaitPost waits, up to 20 seconds, for a post of the bot, not returned
// before, whose text holds every one of parts, and returns it.
func (r *Room) WaitPost(t testing.TB, parts ...string) *event.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last []string
	for time.Now().Before(deadline) {
		msgs, err := r.reader.Messages(context.Background(), r.ID, "", "", mautrix.DirectionBackward, nil, 50)
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
	t.Fatalf("the bot posted nothing holding %q; its posts:\n%s", parts, strings.Join(last, "\n---\n"))
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
