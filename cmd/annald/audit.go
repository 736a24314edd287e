package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel"
	"github.com/spf13/cobra"
)

// errRuleBroken makes annald exit 1 once the report is printed.
var errRuleBroken = errors.New("the log breaks a rule")

func newAuditCommand() *cobra.Command {
	var f auditFlags
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Replay a log from its tiles under the rules and name the first entry that breaks one",
		Long: `audit reads a log as c2sp.org/tlog-tiles — an annald data folder (--data) or
any URL that serves the tiles (--url, with the log's verifier key in --key) —
verifies its signed checkpoint, replays every entry below it under the rules of
every event kind, and checks that the entries hash to the checkpoint's root.
With --data it goes on with what the folder holds past that checkpoint: the
entries in its tiles that no checkpoint covers yet, checked against the tree
state the tiles record, and the entries only in its write-ahead log, which
annald answered before a crash and writes into the tiles at its next start.
They are replayed under the same rules and reported as not yet signed; while
annald runs on the folder they are left to it.
It names the index, the rule (gate) and the reason of the first entry that
breaks a rule, and exits 1; it changes nothing. annald may be running.

Entries written under the rules of an older release that break a rule it did
not have yet are listed as tolerated; the log adopted the current rules at a
log.rules entry. Entries that break a rule and that root accepted with
annald tolerate are listed as accepted, with the log.tolerated entry that
names them and its reason; the replay passes over them and checks the rest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			defer keepReplayGCGoal()()
			silenceTessera()
			src, opts, err := f.source()
			if err != nil {
				return err
			}
			key, err := readKey(f.key)
			if err != nil {
				return err
			}
			rep, err := kernel.Audit(cmd.Context(), src, key, opts...)
			if err != nil {
				return err
			}
			if err := f.print(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if rep.Broken != nil {
				return fmt.Errorf("%w: %v", errRuleBroken, rep.Broken)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.data, "data", "", "data folder of the log (default ./annal-data)")
	cmd.Flags().StringVar(&f.url, "url", "", "URL that serves the log as tlog-tiles (annald's root URL)")
	cmd.Flags().StringVar(&f.key, "key", "", "the log's verifier key, or @FILE (default: the data folder's log.pub)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	return cmd
}

type auditFlags struct {
	data, url, key string
	asJSON         bool
}

// source is the log the flags name, tiles at a URL or a data folder, and
// the audit's options for it. For a data folder without --key it takes
// the folder's verifier key into f.key.
func (f *auditFlags) source() (kernel.LogSource, []kernel.AuditOption, error) {
	switch {
	case f.url != "" && f.data != "":
		return nil, nil, errors.New("give --data or --url, not both")
	case f.url != "":
		if f.key == "" {
			return nil, nil, errors.New("--url needs the log's verifier key (--key KEY or --key @FILE)")
		}
		src, err := kernel.RemoteLog(f.url)
		return src, nil, err
	}
	if f.data == "" {
		f.data = "./annal-data"
	}
	if _, err := os.Stat(f.data); err != nil {
		return nil, nil, fmt.Errorf("data folder: %w", err)
	}
	if f.key == "" {
		var err error
		if f.key, err = kernel.LocalVerifierKey(f.data); err != nil {
			return nil, nil, err
		}
	}
	return kernel.LocalLog(f.data), []kernel.AuditOption{kernel.WithSealedPayloads(f.data), kernel.WithUnsignedTail(f.data)}, nil
}

// readKey returns the verifier key --key gives: the key itself, or @FILE
// for the file that holds it.
func readKey(key string) (string, error) {
	rest, ok := strings.CutPrefix(key, "@")
	if !ok {
		return key, nil
	}
	b, err := os.ReadFile(rest)
	if err != nil {
		return "", fmt.Errorf("--key: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// print writes the report, as JSON with --json.
func (f *auditFlags) print(out io.Writer, rep *kernel.AuditReport) error {
	if f.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	writeAuditReport(out, rep)
	return nil
}

// writeAuditReport writes the report for a human: the checkpoint and the
// replay, then each thing the replay found, one line each.
func writeAuditReport(out io.Writer, rep *kernel.AuditReport) {
	fmt.Fprintf(out, "annald: log %s, signed checkpoint of %d entries, hashes to its root\n", rep.Origin, rep.Size)
	fmt.Fprintf(out, "annald: replayed %d entries under rules %d in %v (%.0f entries/s)\n", rep.Folded, rep.Rules,
		rep.Elapsed.Round(time.Millisecond), float64(rep.Folded)/max(rep.Elapsed.Seconds(), 1e-9))
	for _, f := range rep.Tolerated {
		fmt.Fprintf(out, "annald: tolerated (written under older rules): %v\n", f)
	}
	for _, a := range rep.Accepted {
		fmt.Fprintf(out, "annald: accepted by root at entry %d (%q), passed over: entry %d (%s by %s, leaf %s) breaks the %s rule: %s\n",
			a.Record, a.Why, a.Index, a.Kind, a.Actor, a.LeafHash, a.Gate, a.Reason)
	}
	if rep.SealedOpened+rep.SealedClosed > 0 {
		fmt.Fprintf(out, "annald: sealed payloads: %d judged by every rule from the data folder, %d without their payload (erased or not here: policy patterns taken as decided)\n",
			rep.SealedOpened, rep.SealedClosed)
	}
	switch {
	case rep.UnsignedSkipped != "":
		fmt.Fprintf(out, "annald: entries past the signed checkpoint not read: %s\n", rep.UnsignedSkipped)
	case rep.Unsigned > 0:
		fmt.Fprintf(out, "annald: replayed %d entries past the signed checkpoint, not yet signed (%d of them only in the write-ahead log: the next start or annald rebuild writes them into the tiles)\n",
			rep.Unsigned, rep.UnsignedInWAL)
	}
	if rep.WALTornTail != "" {
		fmt.Fprintf(out, "annald: the write-ahead log ends in a write a crash cut short (never answered, not replayed; the next start cuts it off): %s\n", rep.WALTornTail)
	}
	if n := len(rep.OpenIntents); n > 0 {
		fmt.Fprintf(out, "annald: %d execute intents have no result (allowed, outcome never recorded), first at entry %d\n", n, rep.OpenIntents[0])
	}
	if rep.Broken != nil {
		fmt.Fprintf(out, "annald: BROKEN: %v\n", rep.Broken)
	}
}
