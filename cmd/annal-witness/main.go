// Command annal-witness runs a c2sp.org/tlog-witness witness: it cosigns
// checkpoints of the logs it is configured for, never two inconsistent ones
// of the same log, and serves the latest it cosigned. It gossips with peer
// witnesses and keeps equivocation evidence when a log signed two
// histories. The protocol, the state, gossip, the evidence format and the
// choice of configuration by command rather than file are described in
// package github.com/annal-dev/annal/witness.
package main

import (
	"fmt"
	"os"

	"github.com/annal-dev/annal/internal/cli"
	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "annal-witness:", err)
		os.Exit(1)
	}
}

// DefaultData is the data folder used when --data is not given.
const DefaultData = "./annal-witness-data"

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "annal-witness",
		Short:         "A transparency log witness: cosigns consistent checkpoints (c2sp.org/tlog-witness)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newLogsCommand(), newPeersCommand(), newEvidenceCommand())
	cli.Setup(root)
	return root
}
