package main

import (
	"fmt"
	"io"

	"github.com/annal-dev/annal/witness"
	"github.com/spf13/cobra"
)

func newPeersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "Configure the witnesses this one gossips with (works whether the witness runs or not)",
	}
	cmd.AddCommand(newPeersAddCommand(), newPeersListCommand(), newPeersRemoveCommand())
	return cmd
}

func newPeersAddCommand() *cobra.Command {
	var data, url, key string
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Gossip with another witness, given its URL and verifier key",
		Long: `add makes this witness fetch, every gossip round, the other witness's latest
cosigned checkpoint of each log both witness (GET <url>/<hex SHA-256(origin)>/checkpoint)
and check it against its own. --key is the peer's cosignature/v1 verifier key, as
its serve command prints it; the peer is named after it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := witness.NewPeerConfig(url, key)
			if err != nil {
				return err
			}
			return changeAdmin(data, true, func(a admin) error { return a.AddPeer(p) }, cmd.OutOrStdout(),
				fmt.Sprintf("annal-witness: gossiping with %s at %s", p.Name, p.URL))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&data, "data", DefaultData, "data folder")
	fl.StringVar(&url, "url", "", "the peer's base URL")
	fl.StringVar(&key, "key", "", "the peer's cosignature/v1 verifier key")
	cmd.MarkFlagRequired("url")
	cmd.MarkFlagRequired("key")
	return cmd
}

func newPeersListCommand() *cobra.Command {
	return newListCommand("List the peers", admin.Peers, printPeers)
}

func printPeers(out io.Writer, peers []witness.PeerConfig) {
	if len(peers) == 0 {
		fmt.Fprintln(out, "no peers configured")
	}
	for _, p := range peers {
		fmt.Fprintf(out, "%s\n  url  %s\n  key  %s\n", p.Name, p.URL, p.Key)
	}
}

func newPeersRemoveCommand() *cobra.Command {
	var data, name string
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Stop gossiping with a peer (evidence found with it is kept)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return changeAdmin(data, false, func(a admin) error { return a.RemovePeer(name) }, cmd.OutOrStdout(), "annal-witness: no longer gossiping with "+name)
		},
	}
	cmd.Flags().StringVar(&data, "data", DefaultData, "data folder")
	cmd.Flags().StringVar(&name, "name", "", "the peer's name (its key's name)")
	cmd.MarkFlagRequired("name")
	return cmd
}
