package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"
)

func blobsCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "blobs", Short: "Put and get the bytes behind OIDs (annald --keep-blobs)"}
	put := &cobra.Command{
		Use:   "put FILE|-",
		Short: "Store a file's bytes (- for stdin) and print their OID",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(true)
			if err != nil {
				return err
			}
			data, err := readFileArg(cmd, args[0])
			if err != nil {
				return err
			}
			ctx, cancel := g.context(cmd)
			defer cancel()
			oid, err := c.PutBlob(ctx, data)
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), oid+"\n")
			return err
		},
	}
	var out string
	get := &cobra.Command{
		Use:   "get OID",
		Short: "Fetch a blob (a human's credential), checked against its OID",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(true)
			if err != nil {
				return err
			}
			ctx, cancel := g.context(cmd)
			defer cancel()
			data, err := c.Blob(ctx, args[0])
			if err != nil {
				return err
			}
			return writeOutput(cmd, out, data)
		},
	}
	get.Flags().StringVarP(&out, "output", "o", "", "write the blob to this file")
	cmd.AddCommand(put, get)
	return cmd
}

// readFileArg reads the file a command's argument names, or stdin for "-".
func readFileArg(cmd *cobra.Command, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	return os.ReadFile(name)
}
