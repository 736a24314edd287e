package witness

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdmin_SocketChangesRunningWitness(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	sock := filepath.Join(tw.dir, AdminSocketName)
	// A stale socket file from a crashed witness is replaced.
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := ListenAdmin(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: AdminHandler(tw.store)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	info, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("admin socket mode %04o, want 0600", perm)
	}

	c := NewAdminClient(sock)
	l := newTestLog(t, "example.com/log").growTo(4)
	if a := tw.post(l.request(0, 4)); a.status != http.StatusNotFound {
		t.Fatalf("before add: %d", a.status)
	}
	if err := c.AddLog(l.config()); err != nil {
		t.Fatal(err)
	}
	// The running witness serves the log at once.
	tw.mustCosign(l.request(0, 4))
	if err := c.AddLog(l.config()); !errors.Is(err, ErrLogExists) {
		t.Errorf("second add: %v, want ErrLogExists", err)
	}
	if err := c.AddLog(LogConfig{Origin: "o", Keys: []string{"bad"}}); !errors.Is(err, ErrInvalidLogConfig) {
		t.Errorf("bad key: %v, want ErrInvalidLogConfig", err)
	}
	logs, err := c.Logs()
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 || logs[0].Origin != l.origin || logs[0].Latest == nil || logs[0].Latest.Size != 4 {
		t.Errorf("logs %+v", logs)
	}
	if err := c.RemoveLog("example.com/none", false); !errors.Is(err, ErrUnknownLog) {
		t.Errorf("remove unknown: %v, want ErrUnknownLog", err)
	}
	if err := c.RemoveLog(l.origin, true); err != nil {
		t.Fatal(err)
	}
	if a := tw.post(l.request(4, 4)); a.status != http.StatusNotFound {
		t.Errorf("after remove: %d, want 404", a.status)
	}
	if tw.storedSize(l.origin) != -1 {
		t.Error("remove with forget kept the state")
	}
}

// Admin bodies are read with exact member names: encoding/json would have
// taken "ORIGIN" for "origin", or "ſtate" for "state".
func TestAttack_AdminCaseVariantMember(t *testing.T) {
	tw := startWitness(t, t.TempDir(), Options{})
	h := AdminHandler(tw.store)
	l := newTestLog(t, "example.com/log").growTo(4)
	good, err := json.Marshal(l.config())
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		strings.Replace(string(good), `"origin"`, `"ORIGIN"`, 1),
		strings.Replace(string(good), `"origin"`, `"\u017Frigin"`, 1),
		strings.Replace(string(good), `{`, `{"Origin":"example.com/other",`, 1),
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/logs", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("POST /logs %s: %d %s, want 400", body, rec.Code, rec.Body)
		}
	}
	if logs, _ := tw.store.Logs(); len(logs) != 0 {
		t.Fatalf("a refused body added %+v", logs)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/logs", strings.NewReader(string(good))))
	if rec.Code/100 != 2 {
		t.Fatalf("POST /logs with exact names: %d %s", rec.Code, rec.Body)
	}
}
