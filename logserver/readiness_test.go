package logserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/logserver/api"
)

func getJSON(t *testing.T, url string, into any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode
}

func TestReadinessIsHonest(t *testing.T) {
	ts := newTestServer(t)
	var ready api.Readiness
	if code := getJSON(t, ts.srv.URL+"/v1/readyz", &ready); code != http.StatusOK || !ready.Ready {
		t.Fatalf("readyz of a healthy kernel: %d %+v", code, ready)
	}
	var info api.Info
	if code := getJSON(t, ts.srv.URL+"/v1/info", &info); code != http.StatusOK || !info.Ready || info.NotReady != "" {
		t.Fatalf("info of a healthy kernel: %d %+v", code, info)
	}
}

// A log damaged on disk: the scrub finds it, and readiness, info and
// writes all say so, while the process stays alive.
func TestReadinessOfADamagedLog(t *testing.T) {
	dir := t.TempDir()
	cfg := kernel.DefaultConfig(dir)
	cfg.Logger = discardLogger()
	cfg.DisableProduction, cfg.DisableRateLimit = true, true
	k, err := kernel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cred, _ := os.ReadFile(k.RootCredentialPath())
	root, err := k.Authenticate(strings.TrimSpace(string(cred)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if _, err := k.Submit(context.Background(), root, kernel.ActionRequest{Type: event.Observe, Target: fmt.Sprintf("workspace/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "log", "tile", "entries", "000")
	raw, _ := os.ReadFile(bundle)
	edited := strings.Replace(string(raw), `workspace/9"`, `workspace/6"`, 1)
	if edited == string(raw) {
		t.Fatal("bundle 0 does not hold action 9")
	}
	os.WriteFile(bundle, []byte(edited), 0o644)

	ts := newTestServer(t, func(c *kernel.Config) { c.DataDir = dir })
	var ready api.Readiness
	deadline := time.Now().Add(10 * time.Second)
	for getJSON(t, ts.srv.URL+"/v1/readyz", &ready) == http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("readyz stayed 200 on a damaged log")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ready.Ready || !strings.Contains(ready.Reason, bundle) {
		t.Fatalf("readyz on a damaged log: %+v", ready)
	}
	var health api.Readiness
	if code := getJSON(t, ts.srv.URL+"/v1/healthz", &health); code != http.StatusOK || health.Ready {
		t.Fatalf("healthz on a damaged log: %d %+v", code, health)
	}
	var info api.Info
	if getJSON(t, ts.srv.URL+"/v1/info", &info); info.Ready || !strings.Contains(info.NotReady, bundle) {
		t.Fatalf("info on a damaged log: %+v", info)
	}
	if _, err := ts.root.Submit(context.Background(), api.ActionRequest{Type: "observe", Target: "workspace/after"}); err == nil || !strings.Contains(err.Error(), "503") && !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("a write on a damaged log: %v", err)
	}
}
