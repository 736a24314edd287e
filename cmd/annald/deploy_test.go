package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The systemd unit and the container file run a command annald takes: every
// flag they give is one of annald serve's.
func TestDeployFilesRunTheDocumentedCommand(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/annald.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=\S+/annald (.*)$`).FindSubmatch(unit)
	if m == nil {
		t.Fatal("deploy/annald.service has no ExecStart running annald")
	}
	commands := [][]string{strings.Fields(string(m[1]))}

	containerfile, err := os.ReadFile("../../deploy/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	cm := regexp.MustCompile(`(?m)^CMD (\[.*\])$`).FindSubmatch(containerfile)
	if cm == nil || !strings.Contains(string(containerfile), `ENTRYPOINT ["/usr/local/bin/annald"]`) {
		t.Fatal("deploy/Containerfile does not run annald with a CMD")
	}
	var args []string
	if err := json.Unmarshal(cm[1], &args); err != nil {
		t.Fatal(err)
	}
	commands = append(commands, args)
	for _, args := range commands {
		if len(args) == 0 || args[0] != "serve" {
			t.Fatalf("%v does not run annald serve", args)
		}
		out, err := exec.Command(annaldBinary, append(args, "--help")...).CombinedOutput()
		if err != nil {
			t.Errorf("annald %v: %v\n%s", args, err, out)
		}
	}
}
