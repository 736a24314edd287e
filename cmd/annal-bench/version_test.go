package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/annal-dev/annal/internal/cli"
)

func TestVersionFlag(t *testing.T) {
	cmd := newCommand()
	cli.Setup(cmd)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil || !strings.HasPrefix(out.String(), "annal-bench ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("--version: %q %v", out.String(), err)
	}
}
