package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/annal-dev/annal/witness"
	"github.com/spf13/cobra"
)

// admin is what the logs, peers and evidence commands need; the Store and
// the AdminClient of a running witness both provide it.
type admin interface {
	AddLog(witness.LogConfig) error
	RemoveLog(origin string, forgetState bool) error
	Logs() ([]witness.LogStatus, error)
	AddPeer(witness.PeerConfig) error
	RemovePeer(name string) error
	Peers() ([]witness.PeerConfig, error)
	Evidence() ([]witness.EvidenceRecord, error)
	EvidenceFile(id string) ([]byte, error)
}

// adminLockTimeout is short: a running witness holds the lock for good, and
// then the admin socket is the way in.
const adminLockTimeout = 200 * time.Millisecond

// openAdmin opens the data folder's state directly if no witness runs on
// it, and otherwise reaches the running witness through its admin socket.
// create makes the folder if it does not exist (logs may be configured
// before the first start).
func openAdmin(data string, create bool) (admin, func(), error) {
	if _, err := os.Stat(data); errors.Is(err, fs.ErrNotExist) {
		if !create {
			return nil, nil, fmt.Errorf("no witness data folder at %s", data)
		}
		if err := os.MkdirAll(data, 0o700); err != nil {
			return nil, nil, fmt.Errorf("create data folder: %w", err)
		}
	}
	store, err := witness.OpenStore(filepath.Join(data, witness.StateFileName), adminLockTimeout)
	if err == nil {
		return store, func() { store.Close() }, nil
	}
	if !errors.Is(err, witness.ErrDataDirInUse) {
		return nil, nil, err
	}
	sock := filepath.Join(data, witness.AdminSocketName)
	if _, serr := os.Stat(sock); serr != nil {
		return nil, nil, fmt.Errorf("data folder %s is in use and has no admin socket (%v): stop the witness and retry", data, serr)
	}
	return witness.NewAdminClient(sock), func() {}, nil
}

// withAdmin runs f with the data folder's admin (see openAdmin).
func withAdmin(data string, create bool, f func(admin) error) error {
	a, done, err := openAdmin(data, create)
	if err != nil {
		return err
	}
	defer done()
	return f(a)
}

// changeAdmin makes a change with the data folder's admin (see openAdmin)
// and, once it is made, says so on out.
func changeAdmin(data string, create bool, change func(admin) error, out io.Writer, said string) error {
	return withAdmin(data, create, func(a admin) error {
		if err := change(a); err != nil {
			return err
		}
		fmt.Fprintln(out, said)
		return nil
	})
}

func newLogsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Configure the logs this witness cosigns for (works whether the witness runs or not)",
	}
	cmd.AddCommand(newLogsAddCommand(), newLogsListCommand(), newLogsRemoveCommand())
	return cmd
}

func newLogsAddCommand() *cobra.Command {
	var data string
	var cfg witness.LogConfig
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Witness a new log, given its origin and verifier key(s)",
		Long: `add configures a log by its checkpoint origin and its note verifier key
(--key, repeatable for key rotation; Ed25519, ECDSA, RFC 6962 STH and ML-DSA-44
keys are accepted). --url is the log's tlog-tiles prefix, used by gossip. If the
witness cosigned checkpoints of this origin before it was removed, it resumes
from the latest of them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return changeAdmin(data, true, func(a admin) error { return a.AddLog(cfg) }, cmd.OutOrStdout(), "annal-witness: witnessing "+cfg.Origin)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&data, "data", DefaultData, "data folder")
	fl.StringVar(&cfg.Origin, "origin", "", "the log's checkpoint origin line")
	fl.StringArrayVar(&cfg.Keys, "key", nil, "the log's note verifier key (repeatable)")
	fl.StringVar(&cfg.TileURL, "url", "", "the log's c2sp.org/tlog-tiles URL prefix (optional, for gossip)")
	cmd.MarkFlagRequired("origin")
	cmd.MarkFlagRequired("key")
	return cmd
}

func newLogsListCommand() *cobra.Command {
	return newListCommand("List the logs witnessed, with the latest checkpoint cosigned for each", admin.Logs, printLogs)
}

// newListCommand is a list command: it fetches the list from the data
// folder's admin and prints it, as JSON with --json.
func newListCommand[T any](short string, fetch func(admin) ([]T, error), print func(io.Writer, []T)) *cobra.Command {
	var data string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(data, false, func(a admin) error {
				list, err := fetch(a)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), list)
				}
				print(cmd.OutOrStdout(), list)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&data, "data", DefaultData, "data folder")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printJSON prints v indented; a nil slice prints as [].
func printJSON[T any](out io.Writer, v []T) error {
	if v == nil {
		v = []T{}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printLogs(out io.Writer, logs []witness.LogStatus) {
	if len(logs) == 0 {
		fmt.Fprintln(out, "no logs configured")
		return
	}
	for _, l := range logs {
		fmt.Fprintln(out, l.Origin)
		for _, k := range l.Keys {
			fmt.Fprintf(out, "  key       %s\n", k)
		}
		if l.TileURL != "" {
			fmt.Fprintf(out, "  tiles     %s\n", l.TileURL)
		}
		if l.Latest == nil {
			fmt.Fprintln(out, "  cosigned  nothing yet")
		} else {
			fmt.Fprintf(out, "  cosigned  size %d at %s\n", l.Latest.Size, l.Latest.CosignedAt.Format(time.RFC3339))
		}
	}
}

func newLogsRemoveCommand() *cobra.Command {
	var data, origin string
	var forget bool
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Stop witnessing a log",
		Long: `remove stops cosigning for a log. The latest checkpoint cosigned for it is
kept, so that adding the log again cannot make the witness cosign a history
inconsistent with it; --forget-state drops it too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return changeAdmin(data, false, func(a admin) error { return a.RemoveLog(origin, forget) }, cmd.OutOrStdout(), "annal-witness: no longer witnessing "+origin)
		},
	}
	cmd.Flags().StringVar(&data, "data", DefaultData, "data folder")
	cmd.Flags().StringVar(&origin, "origin", "", "the log's checkpoint origin line")
	cmd.Flags().BoolVar(&forget, "forget-state", false, "also forget the latest checkpoint cosigned for the log")
	cmd.MarkFlagRequired("origin")
	return cmd
}
