package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The replay mode fills a log, times annald rebuild and audit of it with a
// baseline annald and this one in turn, prints each one's rates of every
// entry and the ratios, and writes the in-process CPU profiles.
func TestReplay_Small(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs annald")
	}
	o := testOptions(t)
	profile := filepath.Join(t.TempDir(), "replay.prof")
	r := replayOptions{events: 600, rounds: 1, profile: profile,
		// The annald the run builds serves as its own baseline here.
		baseline: filepath.Join(o.dir, "bin", "annald")}
	var out bytes.Buffer
	if err := runReplay(context.Background(), o, r, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"round 1 baseline rebuild", "round 1 baseline audit", "round 1 this rebuild", "round 1 this audit", "load average"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	// Every entry the fill wrote, and the kernel's own, is replayed.
	rows := regexp.MustCompile(`(?m)^this (rebuild|audit) +(\d+) .* \d+\.\d\dx, \d+\.\d\dx, \d+\.\d\dx$`).FindAllStringSubmatch(text, -1)
	if len(rows) != 2 {
		t.Fatalf("want a ratio row for rebuild and audit:\n%s", text)
	}
	for _, row := range rows {
		if n, _ := strconv.Atoi(row[2]); n < 600 {
			t.Errorf("%s replayed %s entries, fewer than the 600 written", row[1], row[2])
		}
	}
	for _, p := range []string{profile + ".rebuild", profile + ".audit"} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", p, err)
		}
	}
}
