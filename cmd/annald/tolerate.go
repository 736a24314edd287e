package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/annal-dev/annal/kernel"
	"github.com/spf13/cobra"
)

func newTolerateCommand() *cobra.Command {
	var data, reason, credentialFile string
	var entries []uint
	cmd := &cobra.Command{
		Use:   "tolerate",
		Short: "Have root accept entries of the log that break a rule, so that annald serves it again; recorded in the log",
		Long: `tolerate is the way back for a data folder whose log holds an entry its own
rules refuse, which releases before the sequencer could write when requests
raced (annald then stopped, and would not open the folder again: annald
audit names the entry). It folds the log, passing over exactly the entries
named with --entry (each must break a rule; any other entry that does stops
it, named), and appends one log.tolerated entry under root, acting with the
root credential, that names each entry, its leaf hash, the rule it breaks
and --reason. From then on every fold — annald serve, rebuild, audit —
passes over those entries, changing nothing, and checks every other entry;
annald audit lists them as accepted. The entries stay in the log as
evidence, and nothing is tolerated that no log.tolerated entry names.
annald must not be running on the folder.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(entries) == 0 {
				return errors.New("name the entries to tolerate with --entry (annald audit names the first that breaks a rule)")
			}
			if credentialFile == "" {
				credentialFile = filepath.Join(data, "root.credential")
			}
			raw, err := os.ReadFile(credentialFile)
			if err != nil {
				return fmt.Errorf("the root credential: %w", err)
			}
			cfg := offlineConfig(data)
			indices := make([]uint64, len(entries))
			for i, e := range entries {
				indices[i] = uint64(e)
			}
			rep, err := kernel.Tolerate(cmd.Context(), cfg, strings.TrimSpace(string(raw)), indices, reason)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, e := range rep.Entries {
				fmt.Fprintf(out, "annald: root accepted entry %d (%s by %s, leaf %s), which breaks the %s rule: %s\n",
					e.Index, e.Kind, e.Actor, e.LeafHash, e.Gate, e.Reason)
			}
			fmt.Fprintf(out, "annald: recorded at entry %d (log.tolerated); every fold passes over these entries and checks the rest\n", rep.Record)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "./annal-data", "data folder")
	cmd.Flags().UintSliceVar(&entries, "entry", nil, "index of an entry to accept (repeat for more)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the entries are accepted: recorded in the log (required)")
	cmd.Flags().StringVar(&credentialFile, "credential-file", "", "file holding the root credential (default: the data folder's root.credential)")
	return cmd
}
