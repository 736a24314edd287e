package cli

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func tree() *cobra.Command {
	root := &cobra.Command{Use: "tool", SilenceUsage: true, SilenceErrors: true}
	group := &cobra.Command{Use: "holds", Short: "a group"}
	group.AddCommand(&cobra.Command{Use: "approve", RunE: func(*cobra.Command, []string) error { return nil }})
	root.AddCommand(group)
	Setup(root)
	return root
}

func run(args ...string) (string, error) {
	root := tree()
	var out strings.Builder
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestStrictGroups(t *testing.T) {
	if _, err := run("holds", "aprove", "X"); err == nil || !strings.Contains(err.Error(), `unknown command "aprove" for "tool holds"`) {
		t.Fatalf("a mistyped subcommand: %v", err)
	}
	if out, err := run("holds"); err != nil || !strings.Contains(out, "approve") {
		t.Fatalf("a group alone: %q %v", out, err)
	}
	if _, err := run("holds", "approve"); err != nil {
		t.Fatalf("the real subcommand: %v", err)
	}
}

func TestVersion(t *testing.T) {
	out, err := run("--version")
	if err != nil || !strings.HasPrefix(out, "tool ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: %q %v", out, err)
	}
}

// StartCPUProfile writes a gzipped pprof profile that is whole once
// stopped; a file it cannot make is an error naming the flag.
func TestStartCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := StartCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++
	}
	stop()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("profile is not gzip (x=%d): %v", x, err)
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		t.Fatalf("profile is cut short: %v", err)
	}
	if _, err := StartCPUProfile(filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.pprof")); err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Fatalf("profile into a missing folder: %v", err)
	}
}
