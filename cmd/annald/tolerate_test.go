package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
)

// annald tolerate, from outside, on the data folder the release before the
// sequencer left after 50 concurrent creations with one share to give
// (kernel/testdata/refused-share): serve refuses it and names the command;
// tolerate without a reason changes nothing; with one it records the
// acceptance; audit lists it and passes; serve then takes writes again.
func TestTolerateCommand(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", "../../kernel/testdata/refused-share/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the fixture: %v %s", err, out)
	}
	// git keeps no modes beyond the executable bit: a clone has the
	// fixture's secrets at 0644, which annald rightly refuses to use.
	for _, secret := range []string{"log.key", "root.credential"} {
		if err := os.Chmod(dir+"/"+secret, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := tryStartDaemon(dir); err == nil {
		d.stop(t)
		t.Fatal("annald serves a log holding an entry its rules refuse")
	} else if !strings.Contains(err.Error(), "annald tolerate --entry 3") {
		t.Fatalf("serve's refusal does not name the way back: %v", err)
	}
	out, err := annald(t, "audit", "--data", dir)
	if err == nil || !strings.Contains(out, "BROKEN: entry 3") {
		t.Fatalf("audit before: %v\n%s", err, out)
	}
	if out, err := annald(t, "tolerate", "--data", dir, "--entry", "3"); err == nil || !strings.Contains(out, "reason") {
		t.Fatalf("tolerate without a reason: %v\n%s", err, out)
	}
	if out, err := annald(t, "tolerate", "--data", dir, "--entry", "2", "--entry", "3", "--reason", "r"); err == nil || !strings.Contains(out, "entry 2 breaks no rule") {
		t.Fatalf("tolerate an entry that folds: %v\n%s", err, out)
	}
	out, err = annald(t, "tolerate", "--data", dir, "--entry", "3", "--reason", "raced past a missing claim")
	if err != nil || !strings.Contains(out, "root accepted entry 3") || !strings.Contains(out, "recorded at entry 4") {
		t.Fatalf("tolerate: %v\n%s", err, out)
	}
	out, err = annald(t, "audit", "--data", dir)
	if err != nil || !strings.Contains(out, `accepted by root at entry 4 ("raced past a missing claim")`) || strings.Contains(out, "BROKEN") {
		t.Fatalf("audit after: %v\n%s", err, out)
	}
	d := startDaemon(t, dir)
	root := d.client(t, d.rootCredential(t))
	if _, err := root.Submit(context.Background(), api.ActionRequest{Type: "observe", Target: "workspace/after"}); err != nil {
		t.Fatalf("an action after tolerate: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
