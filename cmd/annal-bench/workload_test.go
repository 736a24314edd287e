package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/annal-dev/annal/internal/cli"
)

// The workload subcommand runs internal/workload and prints its table;
// the workload itself is tested in its package.
func TestWorkloadCommand(t *testing.T) {
	cmd := newCommand()
	cli.Setup(cmd)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"workload", "--dir", t.TempDir(), "--seed", "42", "--duration", "0", "--ops", "300", "--workers", "4", "--only", "act,read"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"annal-bench workload: seed 42, 4 workers", "operation", "act.mutate", "read back after the restart", "no failures"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	cmd = newCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"workload", "--dir", t.TempDir(), "--ops", "1", "--only", "nothing"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `no operation "nothing"`) {
		t.Errorf("an unknown operation: %v", err)
	}
}
