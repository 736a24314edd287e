package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/annal-dev/annal/api"
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

// A tile damaged on disk under a running kernel: the next write of the
// tiles fails (the action itself is answered once the write-ahead log holds
// it), and readiness, info and writes all say which file, while the
// process stays alive.
func TestReadinessOfADamagedLog(t *testing.T) {
	ts := newTestServer(t)
	for i := range 3 { // each waits for the tiles to hold it
		if _, err := ts.root.SubmitAndWait(context.Background(), api.ActionRequest{Type: "observe", Target: fmt.Sprintf("workspace/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	tiles, _ := filepath.Glob(filepath.Join(ts.k.LogPath(), "tile", "0", "000.p", "*"))
	if len(tiles) == 0 {
		t.Fatal("no partial level-0 tile")
	}
	for _, tile := range tiles {
		raw, _ := os.ReadFile(tile)
		os.WriteFile(tile, raw[:len(raw)-5], 0o644)
	}
	if _, err := ts.root.Submit(context.Background(), api.ActionRequest{Type: "observe", Target: "workspace/onto-damage"}); err != nil {
		t.Fatalf("an action the write-ahead log takes: %v", err)
	}
	var ready api.Readiness
	deadline := time.Now().Add(10 * time.Second)
	for getJSON(t, ts.srv.URL+"/v1/readyz", &ready) == http.StatusOK || !strings.Contains(ready.Reason, "annald repair") {
		if time.Now().After(deadline) {
			t.Fatalf("readyz on a damaged log: %+v", ready)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ready.Ready || !strings.Contains(ready.Reason, filepath.Join(ts.k.LogPath(), "tile", "0", "000.p")) {
		t.Fatalf("readyz on a damaged log: %+v", ready)
	}
	var health api.Readiness
	if code := getJSON(t, ts.srv.URL+"/v1/healthz", &health); code != http.StatusOK || health.Ready {
		t.Fatalf("healthz on a damaged log: %d %+v", code, health)
	}
	var info api.Info
	if getJSON(t, ts.srv.URL+"/v1/info", &info); info.Ready || info.NotReady != ready.Reason {
		t.Fatalf("info on a damaged log: %+v", info)
	}
	if _, err := ts.root.Submit(context.Background(), api.ActionRequest{Type: "observe", Target: "workspace/after"}); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("a write on a damaged log: %v", err)
	}
}

// A checkpoint damaged on disk under a running kernel is never served.
func TestDamagedCheckpointIsNotServed(t *testing.T) {
	ts := newTestServer(t)
	if _, err := ts.root.SubmitAndWait(context.Background(), api.ActionRequest{Type: "observe", Target: "workspace/a"}); err != nil {
		t.Fatal(err)
	}
	good, err := ts.root.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(ts.k.LogPath(), "checkpoint")
	bad := []byte(strings.Replace(string(good), "\n1\n", "\n9\n", 1))
	bad[len(bad)-5] ^= 1
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(ts.srv.URL + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && string(body) != string(good) {
		t.Fatalf("served a checkpoint that is not the last verified one:\n%s", body)
	}
}
