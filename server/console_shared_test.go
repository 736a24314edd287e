package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/annal-dev/annal/internal/servicestest"
	"github.com/annal-dev/annal/internal/sharedstore"
)

// sharedConsole is the console sessions of one instance of a log on
// shared storage, its data folder holding the copied key.
func sharedConsole(t *testing.T, a servicestest.AWS, dir string) *consoleSessions {
	t.Helper()
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{DataDir: dir, DSN: a.DSN, S3: a.S3(), Bucket: a.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := newConsoleSessions()
	c.store = &sharedSessions{s: s}
	return c
}

// Console sessions of a log on shared storage: a sign-in on one instance
// holds on another (the same actor, credential and CSRF token), expires
// on both, and a sign-out on one ends it on both; an actor's sessions are
// bounded as in memory; a row moved to another cookie's id does not open.
func TestSpec002_StatelessKernel_ConsoleSessionsShared(t *testing.T) {
	a := servicestest.NewAWS(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	one := sharedConsole(t, a, dirA)
	kek, _ := os.ReadFile(filepath.Join(dirA, sharedstore.KeyFile))
	os.WriteFile(filepath.Join(dirB, sharedstore.KeyFile), kek, 0o600)
	two := sharedConsole(t, a, dirB)

	cookie, sess, err := one.open("root", "annal_root_secret")
	if err != nil {
		t.Fatal(err)
	}
	got, err := two.get(cookie)
	if err != nil || got == nil || got.actor != "root" || got.credential != "annal_root_secret" || got.csrf != sess.csrf {
		t.Fatalf("the other instance's session: %+v %v", got, err)
	}
	if got, err := two.get("forged"); err != nil || got != nil {
		t.Fatalf("a forged cookie: %+v %v", got, err)
	}
	two.now = func() time.Time { return time.Now().Add(consoleSessionTTL + time.Minute) }
	if got, err := two.get(cookie); err != nil || got != nil {
		t.Fatalf("an expired session: %+v %v", got, err)
	}
	if got, _ := one.get(cookie); got != nil {
		t.Fatal("a session expired (and removed) on one instance lives on another")
	}
	two.now = time.Now

	cookie, _, err = one.open("root", "annal_root_secret")
	if err != nil {
		t.Fatal(err)
	}
	if err := two.close(cookie); err != nil {
		t.Fatal(err)
	}
	if got, _ := one.get(cookie); got != nil {
		t.Fatal("a session signed out on one instance lives on another")
	}

	first, _, _ := one.open("flooder", "cred-f")
	kept, _, _ := two.open("other", "cred-o")
	for range maxSessionsPerActor + 2 {
		if _, _, err := two.open("flooder", "cred-f"); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := one.get(first); got != nil {
		t.Error("an actor's oldest session outlived its limit")
	}
	if got, _ := one.get(kept); got == nil {
		t.Error("another actor's session ended for a flooder's")
	}
	var n int
	one.store.(*sharedSessions).s.DB.QueryRow("SELECT COUNT(*) FROM annal_console_sessions WHERE actor = 'flooder'").Scan(&n)
	if n != maxSessionsPerActor {
		t.Errorf("%d sessions of one actor, want %d", n, maxSessionsPerActor)
	}

	// A row copied under another cookie's id does not open there.
	victim, _, _ := one.open("victim", "cred-v")
	if _, err := one.store.(*sharedSessions).s.DB.Exec(`UPDATE annal_console_sessions SET sealed = (SELECT sealed FROM (SELECT sealed FROM annal_console_sessions WHERE actor = 'other') x) WHERE actor = 'victim'`); err != nil {
		t.Fatal(err)
	}
	if got, err := one.get(victim); err == nil || got != nil {
		t.Fatalf("a moved row opened: %+v %v", got, err)
	}
}
