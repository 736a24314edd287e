package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/evidence"
	"github.com/annal-dev/annal/internal/cli"
	"github.com/annal-dev/annal/verifier"
	"github.com/spf13/cobra"
)

// usageError is a mistake on the command line rather than a failed check.
type usageError struct{ error }

func newRootCommand(stdin io.Reader) *cobra.Command {
	root := &cobra.Command{
		Use:           "annal-verify",
		Short:         "Check Annal proofs offline with the log's verifier key",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newProofCommand(stdin), newConsistencyCommand(stdin), newEvidenceCommand(stdin))
	root.AddCommand(newBundleCommand(stdin), newChainCommand(stdin))
	cli.Setup(root)
	return root
}

type proofFlags struct {
	key, entryFile, policyFile string
	asJSON                     bool
}

func newProofCommand(stdin io.Reader) *cobra.Command {
	var f proofFlags
	cmd := &cobra.Command{
		Use:   "proof (--key KEY | --policy FILE) --entry ENTRY PROOF",
		Short: "Check that an entry is in the log (c2sp.org/tlog-proof)",
		Long: `Check a c2sp.org/tlog-proof offline: the checkpoint's signature by the log key,
that the checkpoint's origin is the key's name, that the entry is a well-formed
Annal event, and that its leaf hash is included at the proof's index.

KEY is the log's verifier key, or @FILE to read it from a file. ENTRY is the
entry's exact bytes (annal event -o); PROOF is the tlog-proof file (annal proof
-o, or the proof of a receipt from submit --wait). Either may be - for stdin.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.entryFile == "" {
				return usageError{errors.New("--entry is required: the entry's exact bytes")}
			}
			policy, vkey, err := f.trust(stdin)
			if err != nil {
				return err
			}
			entry, err := readInput(stdin, f.entryFile, verifier.MaxEntrySize)
			if err != nil {
				return err
			}
			proof, err := readInput(stdin, args[0], checkpoints.MaxTLogProofSize)
			if err != nil {
				return err
			}
			res, cosigners, err := verifyProof(entry, proof, policy, vkey)
			if err != nil {
				return fmt.Errorf("FAILED %w", err)
			}
			if f.asJSON {
				return writeJSON(cmd.OutOrStdout(), map[string]any{
					"ok": true, "origin": res.Origin, "size": res.Size,
					"root_hash": base64.StdEncoding.EncodeToString(res.RootHash[:]),
					"index":     res.Index, "leaf_hash": hex.EncodeToString(res.LeafHash[:]),
					"event": map[string]any{"id": res.Event.ID, "kind": res.Event.Kind, "actor": res.Event.Actor,
						"type": res.Event.Type, "target": res.Event.Target},
					"cosigners": cosigners,
				})
			}
			printProof(cmd.OutOrStdout(), res, cosigners, policy != nil)
			return nil
		},
	}
	cmd.Flags().StringVar(&f.key, "key", "", "the log's verifier key, or @FILE (required)")
	cmd.Flags().StringVar(&f.entryFile, "entry", "", "file with the entry's exact bytes, or - (required)")
	cmd.Flags().StringVar(&f.policyFile, "policy", "", "c2sp.org/tlog-policy file: the log key and the witness quorum the checkpoint must meet (then --key is optional)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	return cmd
}

// trust reads what the proof is checked against: the --policy (nil
// without one) and the --key ("" when a policy stands without it).
func (f *proofFlags) trust(stdin io.Reader) (*verifier.Policy, string, error) {
	var policy *verifier.Policy
	if f.policyFile != "" {
		text, err := readInput(stdin, f.policyFile, verifier.MaxPolicySize)
		if err != nil {
			return nil, "", err
		}
		if policy, err = verifier.ParsePolicy(text); err != nil {
			return nil, "", fmt.Errorf("FAILED %w", err)
		}
	}
	if f.key == "" && policy != nil {
		return policy, "", nil
	}
	vkey, err := readKey(f.key)
	return policy, vkey, err
}

// verifyProof checks the proof of entry under the policy, if one is given
// (and then that its log key is vkey, if that is given too), else under
// vkey. cosigners are the witnesses that met the policy's quorum.
func verifyProof(entry, proof []byte, policy *verifier.Policy, vkey string) (*verifier.ProofResult, []string, error) {
	if policy == nil {
		res, err := verifier.VerifyProof(entry, proof, vkey)
		return res, nil, err
	}
	res, pr, err := verifier.VerifyProofWithPolicy(entry, proof, policy)
	if err == nil && vkey != "" && pr.LogKey != vkey {
		err = fmt.Errorf("the policy's log key %q is not --key", pr.LogKey)
	}
	var cosigners []string
	if pr != nil {
		cosigners = pr.Cosigners
	}
	return res, cosigners, err
}

// printProof says what a proof showed, for a human.
func printProof(out io.Writer, res *verifier.ProofResult, cosigners []string, withPolicy bool) {
	what := res.Event.Kind
	if res.Event.Type != "" {
		what = fmt.Sprintf("%s %s", res.Event.Type, res.Event.Target)
	}
	fmt.Fprintf(out, "OK: event %s (%s by %s)\n  is entry %d of %s\n  leaf hash %x\n  checkpoint size %d, root %s, signed by the log key\n",
		res.Event.ID, what, res.Event.Actor, res.Index, res.Origin, res.LeafHash,
		res.Size, base64.StdEncoding.EncodeToString(res.RootHash[:]))
	if withPolicy {
		fmt.Fprintf(out, "  witness quorum met, cosigned by %s\n", strings.Join(cosigners, ", "))
	}
}

func newConsistencyCommand(stdin io.Reader) *cobra.Command {
	var key, proofFile string
	cmd := &cobra.Command{
		Use:   "consistency --key KEY --proof PROOF OLD NEW",
		Short: "Check that an older checkpoint is a prefix of a newer one",
		Long: `Check that two signed checkpoints of one log describe one history: both are
signed by the log key and PROOF (one base64 hash per line, as served by
GET /v1/proof/consistency?old=<size of OLD>&new=<size of NEW>) proves that the
log at OLD's size is a prefix of the log at NEW's size.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if proofFile == "" {
				return usageError{errors.New("--proof is required")}
			}
			vkey, err := readKey(key)
			if err != nil {
				return err
			}
			oldCP, err := readInput(stdin, args[0], checkpoints.MaxCheckpointSize)
			if err != nil {
				return err
			}
			newCP, err := readInput(stdin, args[1], checkpoints.MaxCheckpointSize)
			if err != nil {
				return err
			}
			proof, err := readInput(stdin, proofFile, 64*(44+1))
			if err != nil {
				return err
			}
			res, err := verifier.VerifyConsistency(oldCP, newCP, proof, vkey)
			if err != nil {
				return fmt.Errorf("FAILED %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "OK: %s at size %d is a prefix of itself at size %d\n",
				res.Origin, res.Old.Size, res.New.Size)
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "the log's verifier key, or @FILE (required)")
	cmd.Flags().StringVar(&proofFile, "proof", "", "file with the consistency proof, or - (required)")
	return cmd
}

func newEvidenceCommand(stdin io.Reader) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "evidence [--key KEY] EVIDENCE",
		Short: "Check an equivocation evidence file: two signed checkpoints of one log that cannot both be true",
		Long: `Check an equivocation evidence file (annal.dev/equivocation-evidence/v1, as
annal-witness writes it): both checkpoints carry valid signatures by the log key,
and either they have one size and two roots, or a consistency proof shows that
the larger tree's first entries have another root than the smaller checkpoint.

With --key (the log's verifier key, or @FILE) the evidence must be about that
key; without it, the file's own key is used and printed. Exit 0 means the log
signed two histories.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var vkey string
			if key != "" {
				var err error
				if vkey, err = readKey(key); err != nil {
					return err
				}
			}
			data, err := readInput(stdin, args[0], evidence.MaxSize)
			if err != nil {
				return err
			}
			res, err := verifier.VerifyEvidence(data, vkey)
			if err != nil {
				return fmt.Errorf("FAILED %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "OK: log %s signed two histories\n  key %s\n", res.Origin, res.LogKey)
			for i := range 2 {
				fmt.Fprintf(out, "  checkpoint %d: size %d, root %s\n", i+1, res.Sizes[i], base64.StdEncoding.EncodeToString(res.Roots[i][:]))
			}
			if res.Sizes[0] != res.Sizes[1] {
				fmt.Fprintf(out, "  the second tree's first %d entries have root %s\n", res.Sizes[0], base64.StdEncoding.EncodeToString(res.PrefixRoot[:]))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "the log's verifier key you trust, or @FILE (default: the file's)")
	return cmd
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d file argument(s), got %d; usage: %s", cmd.Name(), n, len(args), cmd.Use)}
		}
		return nil
	}
}

// readKey takes the key itself or @FILE.
func readKey(key string) (string, error) {
	if key == "" {
		return "", usageError{errors.New("--key is required: the log's verifier key (annald prints it; GET /v1/info has it)")}
	}
	if name, ok := strings.CutPrefix(key, "@"); ok {
		raw, err := readInput(nil, name, 4096)
		if err != nil {
			return "", err
		}
		key = string(raw)
	}
	return strings.TrimSpace(key), nil
}

// readInput reads a whole file (or stdin for "-"), refusing more than limit
// bytes so that a wrong file cannot exhaust memory.
func readInput(stdin io.Reader, name string, limit int64) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		if stdin == nil {
			return nil, usageError{errors.New("stdin cannot be used here")}
		}
		r = stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes, the most it can be", name, limit)
	}
	return data, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
