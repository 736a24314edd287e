package main

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/bundle"
	"github.com/annal-dev/annal/verifier"
	"github.com/spf13/cobra"
)

// trustFlags are the two ways to say which log to trust: a policy (log key,
// witnesses, quorum) or a bare log key.
type trustFlags struct{ policy, key string }

func (f *trustFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.policy, "policy", "", "c2sp.org/tlog-policy file: the log key, the witnesses and the quorum the checkpoint must meet")
	cmd.Flags().StringVar(&f.key, "key", "", "the log's verifier key, or @FILE, when no witness quorum is required")
}

func (f *trustFlags) load(stdin io.Reader) (*verifier.Policy, error) {
	switch {
	case f.policy != "" && f.key != "":
		return nil, usageError{errors.New("give --policy or --key, not both")}
	case f.policy != "":
		text, err := readInput(stdin, f.policy, verifier.MaxPolicySize)
		if err != nil {
			return nil, err
		}
		p, err := verifier.ParsePolicy(text)
		if err != nil {
			return nil, fmt.Errorf("FAILED %w", err)
		}
		return p, nil
	case f.key != "":
		vkey, err := readKey(f.key)
		if err != nil {
			return nil, err
		}
		p, err := verifier.KeyPolicy(vkey)
		if err != nil {
			return nil, fmt.Errorf("FAILED %w", err)
		}
		return p, nil
	}
	return nil, usageError{errors.New("--policy FILE (or --key KEY) is required: the log to trust")}
}

// openStream opens a file, or stdin for "-", to read as a stream.
func openStream(stdin io.Reader, name string) (io.Reader, func(), error) {
	if name == "-" {
		if stdin == nil {
			return nil, nil, usageError{errors.New("stdin cannot be used here")}
		}
		return stdin, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return bufio.NewReaderSize(f, 1<<20), func() { f.Close() }, nil
}

func newBundleCommand(stdin io.Reader) *cobra.Command {
	var trust trustFlags
	var oldFile string
	var asJSON, requireSigned bool
	cmd := &cobra.Command{
		Use:   "bundle (--policy FILE | --key KEY) [--old CHECKPOINT] [--require-signed] [--json] BUNDLE",
		Short: "Check an audit bundle offline: signatures, quorum, every event's inclusion, delta chains",
		Long: `Check an audit bundle (annal.dev/audit-bundle/v1, as annal export writes it)
offline: the checkpoint's signature by the policy's log key and the witness
quorum, the consistency proof if the bundle carries one, every event's encoding,
that every event matches the bundle's selection, every event's inclusion under
the checkpoint, and the delta chain of every session in it. The bundle is read
once, as a stream (BUNDLE may be - for stdin).

With --old CHECKPOINT (a signed checkpoint you already hold), the bundle must
prove that the log at that checkpoint is a prefix of the log it shows.

Every signed request an event carries is checked against its signer's key as
the log registered it (actor.created, actor.key events in the bundle): the
signature, the key current at that entry, the nonce used once, the time, and
that the event is what was signed; a bad one fails the bundle, naming the
entry. The summary counts each actor's actions signed and unsigned;
--require-signed fails on any action not signed by its actor (or not
checkable: signed by a key whose registration the bundle leaves out).

A sealed payload the bundle opens ("opened": payload and salt) is checked
against the commitment its event carries; one it does not open (its subject
erased) is counted, and its event verified like any other.

On success it prints a summary (--json for machines); on failure it names the
first thing that is wrong and exits 1.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := trust.load(stdin)
			if err != nil {
				return err
			}
			opts := &verifier.BundleOptions{}
			if oldFile != "" {
				if opts.OldCheckpoint, err = readInput(stdin, oldFile, checkpoints.MaxCheckpointSize); err != nil {
					return err
				}
			}
			r, closeFn, err := openStream(stdin, args[0])
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := verifier.VerifyBundle(r, p, opts)
			if err != nil {
				return fmt.Errorf("FAILED %w", err)
			}
			if asJSON {
				err = writeJSON(cmd.OutOrStdout(), bundleJSON(res))
			} else {
				printBundle(cmd.OutOrStdout(), res)
			}
			if err == nil && requireSigned {
				err = checkAllSigned(res)
			}
			return err
		},
	}
	trust.add(cmd)
	cmd.Flags().StringVar(&oldFile, "old", "", "a signed checkpoint of the same log you hold; the bundle must prove consistency with it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&requireSigned, "require-signed", false, "fail unless every action in the bundle is signed by its actor, checkably")
	return cmd
}

// checkAllSigned fails on any action not signed by its actor.
func checkAllSigned(res *verifier.BundleResult) error {
	var bad []string
	for _, actor := range slices.Sorted(maps.Keys(res.Signatures)) {
		if c := res.Signatures[actor]; c.Unsigned+c.Unverifiable > 0 {
			bad = append(bad, fmt.Sprintf("%s (%d unsigned, %d unverifiable)", actor, c.Unsigned, c.Unverifiable))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("FAILED %s: --require-signed: actions not signed by their actor: %s", verifier.CheckSignature, strings.Join(bad, ", "))
	}
	return nil
}

func newChainCommand(stdin io.Reader) *cobra.Command {
	var trust trustFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "chain (--policy FILE | --key KEY) [--json] BUNDLE",
		Short: "Check one session's complete delta chain (ADR-0023) in an audit bundle",
		Long: `Check a bundle holding one session's delta events (annal export --session ID
--kind session.delta): everything annal-verify bundle checks, and that every
event is a session.delta of that one session, that each delta's hash
recomputes, that each links to the one before, and that the chain is complete
from its first delta (whose parent is 64 zeros).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := trust.load(stdin)
			if err != nil {
				return err
			}
			r, closeFn, err := openStream(stdin, args[0])
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := verifier.VerifyBundle(r, p, nil)
			if err != nil {
				return fmt.Errorf("FAILED %w", err)
			}
			switch {
			case len(res.Sessions) != 1:
				return fmt.Errorf("FAILED %s: the bundle holds the deltas of %d sessions, a chain is one session's", verifier.CheckDelta, len(res.Sessions))
			case res.Sessions[0].Deltas != res.Events:
				return fmt.Errorf("FAILED %s: %d of the bundle's %d events are not deltas of session %s", verifier.CheckDelta, res.Events-res.Sessions[0].Deltas, res.Events, res.Sessions[0].Session)
			case !res.Sessions[0].Complete:
				return fmt.Errorf("FAILED %s: session %s: the first delta in the bundle (index %d) has parent_hash %s, not the zero hash: the chain is not complete",
					verifier.CheckDelta, res.Sessions[0].Session, res.Sessions[0].FirstIndex, res.Sessions[0].FirstParent)
			}
			s := res.Sessions[0]
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"ok": true, "origin": res.Origin, "size": res.Size, "chain": s, "cosigners": res.Cosigners})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "OK: session %s: a complete chain of %d deltas\n  entries %d to %d of %s (checkpoint size %d)\n  head %s\n",
				s.Session, s.Deltas, s.FirstIndex, s.LastIndex, res.Origin, res.Size, s.Head)
			if len(res.Cosigners) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "  checkpoint cosigned by %s\n", strings.Join(res.Cosigners, ", "))
			}
			return nil
		},
	}
	trust.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func bundleJSON(res *verifier.BundleResult) map[string]any {
	out := map[string]any{
		"ok": true, "origin": res.Origin, "size": res.Size, "root_hash": base64.StdEncoding.EncodeToString(res.RootHash[:]),
		"log_key": res.LogKey, "cosigners": orEmpty(res.Cosigners), "proof": res.Proof, "selection": res.Selection,
		"events": res.Events, "first_index": res.FirstIndex, "last_index": res.LastIndex,
		"first_time": res.FirstTime.UTC().Format(time.RFC3339Nano), "last_time": res.LastTime.UTC().Format(time.RFC3339Nano),
		"by_actor": res.ByActor, "by_kind": res.ByKind, "by_action_type": res.ByActionType,
		"sessions": orEmpty(res.Sessions), "signatures": res.Signatures, "sealed": res.Sealed, "key_events": res.KeyEvents,
	}
	if res.OldSize > 0 {
		out["consistent_with"] = map[string]any{"size": res.OldSize, "root_hash": base64.StdEncoding.EncodeToString(res.OldRoot[:])}
	}
	return out
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func printBundle(w io.Writer, res *verifier.BundleResult) {
	fmt.Fprintf(w, "OK: %d events of %s, all in the log\n", res.Events, res.Origin)
	fmt.Fprintf(w, "  checkpoint size %d, root %s, signed by the log key\n", res.Size, base64.StdEncoding.EncodeToString(res.RootHash[:]))
	if len(res.Cosigners) > 0 {
		fmt.Fprintf(w, "  witness quorum met, cosigned by %s\n", strings.Join(res.Cosigners, ", "))
	}
	if res.Proof == bundle.ProofRange {
		fmt.Fprintf(w, "  every entry of [%d, %d), proven as one range\n", res.FirstIndex, res.LastIndex+1)
	} else {
		fmt.Fprintf(w, "  selected entries from %d to %d, each with its inclusion proof (the others are not disclosed)\n", res.FirstIndex, res.LastIndex)
	}
	fmt.Fprintf(w, "  times %s to %s\n", res.FirstTime.UTC().Format(time.RFC3339Nano), res.LastTime.UTC().Format(time.RFC3339Nano))
	if res.OldSize > 0 {
		fmt.Fprintf(w, "  the log at size %d (root %s) is a prefix of it\n", res.OldSize, base64.StdEncoding.EncodeToString(res.OldRoot[:]))
	}
	printCounts(w, "by actor", res.ByActor)
	printCounts(w, "by kind", res.ByKind)
	if len(res.ByActionType) > 0 {
		printCounts(w, "by action type", res.ByActionType)
	}
	for _, actor := range slices.Sorted(maps.Keys(res.Signatures)) {
		c := res.Signatures[actor]
		line := fmt.Sprintf("  actions of %s: %d signed, %d unsigned", actor, c.Signed, c.Unsigned)
		if c.Unverifiable > 0 {
			line += fmt.Sprintf(", %d signed by a key this bundle does not register", c.Unverifiable)
		}
		fmt.Fprintln(w, line)
	}
	if res.KeyEvents > 0 {
		fmt.Fprintf(w, "  %d key registrations carried besides the selection, to check signatures by\n", res.KeyEvents)
	}
	if s := res.Sealed; s.Opened+s.Closed > 0 {
		fmt.Fprintf(w, "  sealed payloads: %d opened and matching their commitments, %d closed (erased or withheld: only the commitment)\n", s.Opened, s.Closed)
	}
	for _, s := range res.Sessions {
		state := "complete from its first delta"
		if !s.Complete {
			state = "starts mid-chain after " + s.FirstParent
		}
		fmt.Fprintf(w, "  session %s: %d deltas linked, %s, head %s\n", s.Session, s.Deltas, state, s.Head)
	}
}

func printCounts(w io.Writer, title string, m map[string]uint64) {
	keys := slices.Sorted(maps.Keys(m))
	const most = 20
	parts := make([]string, 0, min(len(keys), most))
	for i, k := range keys {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-most))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	fmt.Fprintf(w, "  %s: %s\n", title, strings.Join(parts, ", "))
}
