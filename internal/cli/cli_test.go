package cli

import (
	"io"
	"strings"
	"testing"

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
