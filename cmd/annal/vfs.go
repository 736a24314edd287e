package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/client"
)

// vfsCommand is `annal vfs`: the agent file system (seed 002, Virtual
// File System), addressed by vfs://AGENT/PATH.
func vfsCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "vfs", Short: "List, read and write agents' file trees (vfs://AGENT/PATH; annald --keep-blobs)"}
	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls vfs://AGENT[/DIR]",
		Short: "List the files at or under a directory of an agent's tree: path, OID, log index of the write, writer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.with(cmd, func(ctx context.Context, c *client.Client) error {
				l, err := c.VFSList(ctx, args[0])
				switch {
				case err != nil:
					return err
				case asJSON:
					return printJSON(cmd.OutOrStdout(), l)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				for _, f := range l.Files {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", f.Path, f.OID, f.Index, f.Writer)
				}
				return tw.Flush()
			})
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print the listing as JSON")
	var out string
	cat := &cobra.Command{
		Use:   "cat vfs://AGENT/PATH",
		Short: "Print a file (checked against the OID its write logged), or a view: policy/active.json, policy/history.json, audit/events.jsonl",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.with(cmd, func(ctx context.Context, c *client.Client) error {
				data, _, err := c.VFSRead(ctx, args[0])
				if err != nil {
					return err
				}
				return writeOutput(cmd, out, data)
			})
		},
	}
	cat.Flags().StringVarP(&out, "output", "o", "", "write the content to this file")
	var envelope string
	put := &cobra.Command{
		Use:   "put vfs://AGENT/PATH FILE|-",
		Short: "Write a file (- for stdin): an action the kernel checks and logs with the content's OID",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readFileArg(cmd, args[1])
			if err != nil {
				return err
			}
			return g.with(cmd, func(ctx context.Context, c *client.Client) error {
				w, err := c.VFSPut(ctx, args[0], data, envelope)
				switch {
				case err != nil:
					return err
				case w.Receipt.Status == "held":
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "held %s %s hold %s\n", w.URI, w.OID, w.Receipt.HoldID)
				default:
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s index %d\n", w.URI, w.OID, w.Receipt.Index)
				}
				return err
			})
		},
	}
	put.Flags().StringVar(&envelope, "envelope", "", "the envelope to write under (default: the oldest that allows it)")
	cmd.AddCommand(ls, cat, put)
	return cmd
}
