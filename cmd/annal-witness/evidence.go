package main

import (
	"fmt"
	"time"

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
	var data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the evidence found, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			admin, done, err := openAdmin(data, false)
			if err != nil {
				return err
			}
			defer done()
			list, err := admin.Evidence()
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			out := cmd.OutOrStdout()
			if len(list) == 0 {
				fmt.Fprintln(out, "no evidence")
			}
			for _, e := range list {
				fmt.Fprintf(out, "%s\n  log    %s\n  sizes  %d and %d\n  found  %s by %s\n", e.ID, e.Origin, e.Sizes[0], e.Sizes[1], e.FoundAt.Format(time.RFC3339), e.Source)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", DefaultData, "data folder")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newEvidenceGetCommand() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Print one evidence file, exactly as stored (annal-witness evidence get ID > file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			admin, done, err := openAdmin(data, false)
			if err != nil {
				return err
			}
			defer done()
			file, err := admin.EvidenceFile(args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(file)
			return err
		},
	}
	cmd.Flags().StringVar(&data, "data", DefaultData, "data folder")
	return cmd
}
