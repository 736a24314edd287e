package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// gcPercent is the collector's percentage annald reports on /metrics.
func gcPercent(t *testing.T, d *daemon) float64 { return metricValue(t, d, "go_gc_gogc_percent") }

// metricValue is the value of a metric without labels on annald's
// /metrics, read on a connection of its own.
func metricValue(t *testing.T, d *daemon, name string) float64 {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(d.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			p, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatalf("no %s on /metrics", name)
	return 0
}

// annald serve keeps the collector's goal --gc-headroom above the live
// heap (by default 256 MiB, capped at ten times the live heap): on a
// fresh kernel, whose live heap is a few MB, its percentage is far above
// Go's 100. 0 leaves Go's default; GOGC, set without the flag, wins; a
// negative headroom is refused before anything is made.
func TestServe_GCHeadroom(t *testing.T) {
	if p := gcPercent(t, startDaemon(t, filepath.Join(t.TempDir(), "data"))); p < 200 {
		t.Errorf("default headroom: collector at %v%%, want far above Go's 100", p)
	}
	if p := gcPercent(t, startDaemon(t, filepath.Join(t.TempDir(), "data"), "--gc-headroom", "0")); p != 100 {
		t.Errorf("--gc-headroom 0: collector at %v%%, want Go's 100", p)
	}
	t.Setenv("GOGC", "150")
	if p := gcPercent(t, startDaemon(t, filepath.Join(t.TempDir(), "data"))); p != 150 {
		t.Errorf("GOGC=150: collector at %v%%, want 150", p)
	}
	if p := gcPercent(t, startDaemon(t, filepath.Join(t.TempDir(), "data"), "--gc-headroom", "1073741824")); p <= 150 {
		t.Errorf("GOGC=150 and --gc-headroom 1 GiB: collector at %v%%, want the flag to win", p)
	}

	dir := filepath.Join(t.TempDir(), "data")
	out, err := annald(t, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--gc-headroom", "-1")
	if err == nil || !strings.Contains(out, "--gc-headroom -1") {
		t.Fatalf("--gc-headroom -1: %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused --gc-headroom left %s behind: %v", dir, err)
	}
}

// annald serve --cpuprofile profiles the whole run: the file is written
// and whole (gzip to its end) once annald stops.
func TestServe_CPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "annald.pprof")
	d := startDaemon(t, filepath.Join(t.TempDir(), "data"), "--cpuprofile", path)
	submitN(t, d, 20)
	d.stop(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("profile is not gzip: %v", err)
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		t.Fatalf("profile is cut short: %v", err)
	}
}
