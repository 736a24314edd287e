package main

import (
	"fmt"
	"io"
	"time"

	"github.com/annal-dev/annal/witness"
	"github.com/spf13/cobra"
)

func newEvidenceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "List and fetch the equivocation evidence this witness found",
		Long: `Evidence files (annal.dev/equivocation-evidence/v1) show that a log signed two
histories: two checkpoints with its signature that cannot both be true, and the
proof of it. "annal-verify evidence FILE" checks one offline. They are also
served at GET /evidence and GET /evidence/<id>.`,
	}
	cmd.AddCommand(newEvidenceListCommand(), newEvidenceGetCommand())
	return cmd
}

func newEvidenceListCommand() *cobra.Command {
	return newListCommand("List the evidence found, oldest first", admin.Evidence, printEvidence)
}

func printEvidence(out io.Writer, list []witness.EvidenceRecord) {
	if len(list) == 0 {
		fmt.Fprintln(out, "no evidence")
	}
	for _, e := range list {
		fmt.Fprintf(out, "%s\n  log    %s\n  sizes  %d and %d\n  found  %s by %s\n", e.ID, e.Origin, e.Sizes[0], e.Sizes[1], e.FoundAt.Format(time.RFC3339), e.Source)
	}
}

func newEvidenceGetCommand() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Print one evidence file, exactly as stored (annal-witness evidence get ID > file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(data, false, func(a admin) error {
				file, err := a.EvidenceFile(args[0])
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(file)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&data, "data", DefaultData, "data folder")
	return cmd
}
