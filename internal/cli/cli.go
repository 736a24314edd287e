// Package cli holds what every Annal command line shares: its version and
// strict command groups.
//
// Contract: Setup gives a root command --version (the module version and
// VCS revision the binary was built from), and makes every command group
// (a command with subcommands and nothing to run of its own) refuse an
// unknown subcommand with a non-zero exit ("unknown command"), where cobra
// would print help and exit 0. StartCPUProfile is the servers'
// --cpuprofile.
package cli

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// Version is the version of the running binary: the module version (or
// "devel"), the VCS revision and whether the tree was modified, and Go's.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev + modified
	}
	return v + " " + info.GoVersion
}

// Setup applies the shared behaviour to root and every command below it.
func Setup(root *cobra.Command) {
	root.Version = Version()
	root.SetVersionTemplate(fmt.Sprintf("%s {{.Version}}\n", root.Name()))
	strictGroups(root)
}

func strictGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.NoArgs // cobra answers an argument: unknown command "x" for "annal holds"
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations["group"] = "strict"
}

// StartCPUProfile profiles the process into the file at path (go tool
// pprof) until the returned function is called; errors name the
// --cpuprofile flag.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
