package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeBlocks returns the ```sh blocks of the README section whose
// heading starts with heading.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "\n## "+heading)
	if start < 0 {
		t.Fatalf("README has no section %q", heading)
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatalf("README section %q has no sh block", heading)
	}
	return blocks
}

// TestREADMEWalkthroughAsPasted runs the README's first walkthrough and its
// "Audit bundles" commands exactly as written, one after the other in one
// shell, against a fresh annald: `go run ./cmd/X` runs the built binary X,
// and nothing else is changed. A command that fails fails the test.
func TestREADMEWalkthroughAsPasted(t *testing.T) {
	work := t.TempDir()
	d := startDaemon(t, filepath.Join(work, "annal-data"))
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	// The shim: `go run ./cmd/NAME ARGS` runs the binary built by TestMain.
	script.WriteString(`go() { if [ "$1" = run ]; then local bin="$BINDIR/$(basename "$2")"; shift 2; "$bin" "$@"; else echo "the README runs go $*" >&2; return 1; fi; }` + "\n")
	for _, heading := range []string{"Five minutes", "Audit bundles"} {
		for _, b := range readmeBlocks(t, heading) {
			script.WriteString(b)
			script.WriteString("\n")
		}
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "BINDIR="+filepath.Dir(annalBinary), "ANNAL_SERVER="+d.url)
	cmd.Env = slicesWithout(cmd.Env, "ANNAL_CREDENTIAL", "ANNAL_CREDENTIAL_FILE")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's commands failed: %v\n%s", err, out)
	}
	for _, want := range []string{`"status": "committed"`, "OK: event", "is a prefix of itself", "all in the log"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), "\nOK: "); n < 6 {
		t.Errorf("%d OK lines from annal-verify, want 6 (a proof, a consistency, four bundles; one more as --json):\n%s", n, out)
	}
	holds, err := d.client(t, d.rootCredential(t)).Holds(context.Background(), "")
	if err != nil || len(holds) != 1 || holds[0].Status != "approved" {
		t.Errorf("after the walkthrough the holds are %+v (%v), want the one approved", holds, err)
	}
	for _, f := range []string{"notes.event", "notes.tlog-proof", "grew.proof", "all.bundle", "range.bundle", "agent.bundle", "holds.bundle", "grown.bundle"} {
		if fi, err := os.Stat(filepath.Join(work, f)); err != nil || fi.Size() == 0 {
			t.Errorf("the walkthrough did not write %s: %v", f, err)
		}
	}
}

func slicesWithout(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
