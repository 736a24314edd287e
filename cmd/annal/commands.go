package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/cli"
	"github.com/annal-dev/annal/internal/inert"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const defaultServer = "http://127.0.0.1:7420"

type globalFlags struct {
	server, credential, credentialFile string
	signingKey                         string
	// traceparent: the W3C trace context the requests go on (--traceparent,
	// else env TRACEPARENT), and trace its span context once read.
	traceparent string
	trace       trace.SpanContext
	timeout     time.Duration
	retries     int
	flags       *pflag.FlagSet
	stderr      io.Writer
}

func newRootCommand() *cobra.Command {
	var g globalFlags
	root := &cobra.Command{
		Use:           "annal",
		Short:         "Talk to an Annal kernel: submit actions, fetch receipts and proofs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("ANNAL_SERVER", defaultServer), "kernel URL (env ANNAL_SERVER)")
	// No default from the environment: --help must never print a secret,
	// and a flag given on the command line always beats the environment.
	pf.StringVar(&g.credential, "credential", "", "bearer credential (else env ANNAL_CREDENTIAL)")
	pf.StringVar(&g.credentialFile, "credential-file", "", "file holding the credential (else env ANNAL_CREDENTIAL_FILE)")
	pf.StringVar(&g.signingKey, "signing-key", "", "file holding a signing key (annal keys generate): sign every request with it (else env ANNAL_SIGNING_KEY_FILE)")
	g.flags = pf
	pf.DurationVar(&g.timeout, "timeout", time.Minute, "give up after this long")
	pf.IntVar(&g.retries, "retries", client.DefaultRetry.Attempts-1, "how often to send again a request the kernel refused with 429 or 503 without doing it (backing off)")
	pf.StringVar(&g.traceparent, "traceparent", "", "W3C traceparent the requests continue: the events they lead to record its trace id (else env TRACEPARENT)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		g.stderr = cmd.ErrOrStderr()
		return g.readTraceparent()
	}
	root.AddCommand(submitCommand(&g), proofCommand(&g), eventCommand(&g), checkpointCommand(&g), consistencyCommand(&g), infoCommand(&g), agentsCommand(&g), envelopesCommand(&g), holdsCommand(&g),
		ringsCommand(&g), descriptorsCommand(&g), elevateCommand(&g), sessionsCommand(&g), killCommand(&g), quarantineCommand(&g),
		signalCommand(&g), sagasCommand(&g), policiesCommand(&g), keysCommand(&g), eraseCommand(&g))
	root.AddCommand(exportCommand(&g), whoamiCommand(&g), historyCommand(&g), tailCommand(&g), mcpCommand(&g), blobsCommand(&g), execCommand(&g), gateCommand(&g), vfsCommand(&g))
	root.AddCommand(matrixCommand(&g), hookCommand(&g))
	cli.Setup(root)
	return root
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (g *globalFlags) client(needCredential bool) (*client.Client, error) {
	cred, err := g.credentialValue()
	if err != nil {
		return nil, err
	}
	if needCredential && cred == "" {
		return nil, errors.New("no credential: pass --credential or --credential-file, or set ANNAL_CREDENTIAL or ANNAL_CREDENTIAL_FILE")
	}
	c, err := g.clientWith(cred)
	if err != nil {
		return nil, err
	}
	if file := cmp.Or(g.signingKey, os.Getenv("ANNAL_SIGNING_KEY_FILE")); file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		skey := strings.TrimSpace(string(raw))
		if _, err := c.WithSigningKey(skey); err != nil {
			return nil, fmt.Errorf("signing key %s: %w", file, err)
		}
	}
	return c, nil
}

// notef tells the person at the terminal what the command is doing, on
// stderr (stdout stays the answer).
func (g *globalFlags) notef(format string, args ...any) {
	w := g.stderr
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, format+"\n", args...)
}

// waitProof waits for the proof of index, saying on stderr what it waits
// for.
func (g *globalFlags) waitProof(ctx context.Context, c *client.Client, index uint64) ([]byte, error) {
	return c.WaitProofReporting(ctx, index, func(status string) { g.notef("annal: %s", status) })
}

// credentialValue is the credential to present: a flag given on the
// command line, else ANNAL_CREDENTIAL, else ANNAL_CREDENTIAL_FILE. A
// flag always wins, so that a human's explicit credential is never
// replaced by an agent's from the environment.
func (g *globalFlags) credentialValue() (string, error) {
	byFlag, byFileFlag := g.flags.Changed("credential"), g.flags.Changed("credential-file")
	switch {
	case byFlag && byFileFlag && g.credential != "" && g.credentialFile != "":
		return "", errors.New("give --credential or --credential-file, not both")
	case byFlag && g.credential != "":
		return g.credential, nil
	case byFileFlag && g.credentialFile != "":
		return readCredentialFile(g.credentialFile)
	case byFlag || byFileFlag:
		return "", nil // given, and empty: no credential, whatever the environment holds
	}
	if cred := os.Getenv("ANNAL_CREDENTIAL"); cred != "" {
		return cred, nil
	}
	if file := os.Getenv("ANNAL_CREDENTIAL_FILE"); file != "" {
		return readCredentialFile(file)
	}
	return "", nil
}

func readCredentialFile(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("credential file: %w", err)
	}
	return strings.TrimSpace(string(raw)), nil
}

func (g *globalFlags) context(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if g.trace.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, g.trace) // the client sends it as traceparent
	}
	return context.WithTimeout(ctx, g.timeout)
}

// readTraceparent reads --traceparent, else the environment's TRACEPARENT
// (OpenTelemetry's carrier for a process), refusing one that is not a W3C
// traceparent rather than sending the requests untraced.
func (g *globalFlags) readTraceparent() error {
	tp := g.traceparent
	if tp == "" {
		tp = os.Getenv("TRACEPARENT")
	}
	if tp == "" {
		return nil
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	if g.trace = trace.SpanContextFromContext(ctx); !g.trace.IsValid() {
		return fmt.Errorf("traceparent %q is not a W3C traceparent (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>)", tp)
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func parseIndexArg(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("index %q is not a non-negative integer", s)
	}
	return n, nil
}

type submitFlags struct {
	typ, target, payload, payloadFile, payloadHash, proofOut string
	wait, seal                                               bool
	session, actionID, subject, envelope                     string
	res                                                      api.Resources
}

func submitCommand(g *globalFlags) *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit --type TYPE --target PATH [--payload JSON | --payload-file FILE | --payload-hash sha256:HEX] [--envelope ID] [--seal] [--subject ID] [--session S] [--network HOST]...",
		Short: "Submit an action; prints the receipt once it is durably logged",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(true)
			if err != nil {
				return err
			}
			req, err := f.request()
			if err != nil {
				return err
			}
			ctx, cancel := g.context(cmd)
			defer cancel()
			r, err := c.Submit(ctx, req)
			if err != nil {
				return err
			}
			if (f.wait || f.proofOut != "") && r.Status != "held" {
				g.addProof(ctx, c, r)
			}
			if f.proofOut != "" {
				if r.Proof == "" {
					return fmt.Errorf("action committed at index %d, but no proof yet: %s", r.Index, r.ProofError)
				}
				if err := os.WriteFile(f.proofOut, []byte(r.Proof), 0o644); err != nil {
					return err
				}
			}
			return printJSON(cmd.OutOrStdout(), r)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.typ, "type", "", "observe, create, mutate or execute")
	fl.StringVar(&f.target, "target", "", "target path, e.g. workspace/notes.md")
	fl.StringVar(&f.payload, "payload", "", "payload as JSON")
	fl.StringVar(&f.payloadFile, "payload-file", "", "file holding the JSON payload")
	fl.StringVar(&f.payloadHash, "payload-hash", "", "sha256:<hex> of a payload kept outside the log")
	fl.BoolVar(&f.seal, "seal", false, "keep the payload sealed beside the log (the log holds a salted commitment) until its subject is erased")
	fl.StringVar(&f.subject, "subject", "", "the data subject a sealed payload is about, a pseudonymous id (implies --seal; default: your actor id)")
	fl.BoolVar(&f.wait, "wait", false, "wait until a signed checkpoint covers the action; the receipt then holds the proof")
	fl.StringVar(&f.proofOut, "proof-out", "", "with --wait implied: write the tlog-proof to this file")
	fl.StringVar(&f.envelope, "envelope", "", "the envelope the action runs under (default: the oldest live one that grants it)")
	fl.StringVar(&f.session, "session", "", "the session the action runs in")
	fl.StringVar(&f.actionID, "action-id", "", "a registered action descriptor the action is")
	fl.StringArrayVar(&f.res.Network, "network", nil, "a network destination the action uses, host[:port] (repeatable)")
	fl.StringArrayVar(&f.res.FilesystemRead, "fs-read", nil, "a path the action reads (repeatable)")
	fl.StringArrayVar(&f.res.FilesystemWrite, "fs-write", nil, "a path the action writes (repeatable)")
	fl.BoolVar(&f.res.Subprocess, "subprocess", false, "the action starts a process")
	fl.Uint64Var(&f.res.Tools, "tools", 0, "concurrent tool executions the action uses")
	_ = cmd.MarkFlagRequired("type")
	_ = cmd.MarkFlagRequired("target")
	return cmd
}

// request is the action the flags describe: its resources when any is
// declared, its payload from --payload or --payload-file (JSON).
func (f *submitFlags) request() (api.ActionRequest, error) {
	req := api.ActionRequest{Type: f.typ, Target: f.target, PayloadHash: f.payloadHash, Session: f.session, ActionID: f.actionID,
		Envelope: f.envelope, Seal: f.seal, Subject: f.subject}
	if res := f.res; len(res.Network)+len(res.FilesystemRead)+len(res.FilesystemWrite) > 0 || res.Subprocess || res.Tools > 0 {
		req.Resources = &f.res
	}
	switch {
	case f.payload != "" && f.payloadFile != "":
		return req, errors.New("give --payload or --payload-file, not both")
	case f.payload != "":
		req.Payload = json.RawMessage(f.payload)
	case f.payloadFile != "":
		raw, err := os.ReadFile(f.payloadFile)
		if err != nil {
			return req, err
		}
		req.Payload = raw
	}
	if req.Payload != nil && !json.Valid(req.Payload) {
		return req, errors.New("the payload is not valid JSON")
	}
	return req, nil
}

// addProof waits for the proof of receipt r's entry and puts it, with
// its checkpoint, in r; or why there is none.
func (g *globalFlags) addProof(ctx context.Context, c *client.Client, r *api.Receipt) {
	p, err := g.waitProof(ctx, c, r.Index)
	if err != nil {
		r.ProofError = err.Error()
		return
	}
	r.Proof = string(p)
	if _, cp, ok := strings.Cut(r.Proof, "\n\n"); ok {
		r.Checkpoint = cp
	}
}

// onIndex is the RunE of a command on the entry at INDEX, its argument:
// run gets the index, a read-only client and the command's context.
func (g *globalFlags) onIndex(run func(ctx context.Context, cmd *cobra.Command, c *client.Client, index uint64) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		index, err := parseIndexArg(args[0])
		if err != nil {
			return err
		}
		return g.read(cmd, func(ctx context.Context, c *client.Client) error { return run(ctx, cmd, c, index) })
	}
}

func proofCommand(g *globalFlags) *cobra.Command {
	var wait bool
	var out string
	cmd := &cobra.Command{
		Use:   "proof INDEX",
		Short: "Print the c2sp.org/tlog-proof of an entry against the latest checkpoint",
		Args:  cobra.ExactArgs(1),
		RunE: g.onIndex(func(ctx context.Context, cmd *cobra.Command, c *client.Client, index uint64) error {
			var p []byte
			var err error
			if wait {
				p, err = g.waitProof(ctx, c, index)
			} else {
				p, err = c.Proof(ctx, index)
			}
			if err != nil {
				return err
			}
			return writeOutput(cmd, out, p)
		}),
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until a checkpoint covers the entry")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the proof to this file")
	return cmd
}

func eventCommand(g *globalFlags) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "event INDEX",
		Short: "Print the log entry at INDEX exactly as logged (canonical JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: g.onIndex(func(ctx context.Context, cmd *cobra.Command, c *client.Client, index uint64) error {
			e, err := c.Event(ctx, index)
			if err != nil {
				return err
			}
			if out != "" {
				// Exactly the entry bytes: the leaf hash covers them.
				return os.WriteFile(out, e, 0o644)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", e)
			return err
		}),
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the exact entry bytes to this file (for annal-verify --entry)")
	return cmd
}

func checkpointCommand(g *globalFlags) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Print the latest signed checkpoint",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.read(cmd, func(ctx context.Context, c *client.Client) error {
				cp, err := c.Checkpoint(ctx)
				if err != nil {
					return err
				}
				return writeOutput(cmd, out, cp)
			})
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the signed checkpoint to this file")
	return cmd
}

func consistencyCommand(g *globalFlags) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "consistency OLD_SIZE NEW_SIZE",
		Short: "Print the consistency proof between two log sizes (one base64 hash per line)",
		Long: `Print the RFC 6962 consistency proof that the log at OLD_SIZE is a prefix of
the log at NEW_SIZE; the sizes are the second lines of two checkpoints. Check it
offline with: annal-verify consistency --key KEY --proof FILE OLD NEW.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			oldSize, err := parseIndexArg(args[0])
			if err != nil {
				return err
			}
			newSize, err := parseIndexArg(args[1])
			if err != nil {
				return err
			}
			return g.read(cmd, func(ctx context.Context, c *client.Client) error {
				hashes, err := c.Consistency(ctx, oldSize, newSize)
				if err != nil {
					return err
				}
				return writeOutput(cmd, out, checkpoints.MarshalHashes(hashes))
			})
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the proof to this file")
	return cmd
}

// writeOutput writes data to the file named by out, or to stdout.
func writeOutput(cmd *cobra.Command, out string, data []byte) error {
	if out != "" {
		return os.WriteFile(out, data, 0o644)
	}
	_, err := cmd.OutOrStdout().Write(data)
	return err
}

func infoCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Print the log's origin, verifier key and size",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.read(cmd, func(ctx context.Context, c *client.Client) error {
				info, err := c.Info(ctx)
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), info)
			})
		},
	}
}

func agentsCommand(g *globalFlags) *cobra.Command {
	agents := &cobra.Command{Use: "agents", Short: "Create agents; show, freeze, unfreeze or terminate actors"}
	var name, purpose, expires, kind string
	var grants []string
	var energy uint64
	var share int64
	var trust float64
	var consensus, sealPayloads bool
	create := &cobra.Command{
		Use:   "create --name NAME --purpose TEXT [--grant PATTERN:ACTIONS]... [--energy N]",
		Short: "Create an agent (humans only; root may create humans with --kind human); prints its credential once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gs, err := parseGrants(grants)
			if err != nil {
				return err
			}
			req := api.AgentRequest{Kind: kind, Name: name, Purpose: purpose, Expires: expires, Grants: gs, Energy: energy, SealPayloads: sealPayloads}
			if share >= 0 {
				sh := uint64(share)
				req.Share = &sh
			}
			if cmd.Flags().Changed("trust") {
				req.Trust, req.Consensus = &trust, consensus
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) {
				return c.CreateAgent(ctx, req)
			})
		},
	}
	create.Flags().StringVar(&kind, "kind", "", "agent (default) or human (root only)")
	create.Flags().StringVar(&name, "name", "", "agent name")
	create.Flags().StringVar(&purpose, "purpose", "", "what the agent is for")
	create.Flags().StringVar(&expires, "expires", "", "when the agent stops being able to act (RFC 3339)")
	create.Flags().StringArrayVar(&grants, "grant", nil, "writable targets, PATTERN:ACTIONS, e.g. 'workspace/**:create,mutate' (repeatable; '*' for all actions)")
	create.Flags().Uint64Var(&energy, "energy", 0, "energy to give the agent from your own balance")
	create.Flags().Int64Var(&share, "share", -1, "share of energy production, given from your own (default 0)")
	create.Flags().Float64Var(&trust, "trust", 0, "the agent's trust score, 0 to 1: above 0.60 gives Ring 2, above 0.95 with --consensus Ring 1 (default: none, Ring 3)")
	create.Flags().BoolVar(&consensus, "consensus", false, "the agent's trust has consensus (needed for Ring 1)")
	create.Flags().BoolVar(&sealPayloads, "seal-payloads", false, "seal every payload the agent sends (observe, create, mutate): the log holds commitments, erasable by subject")
	_ = create.MarkFlagRequired("name")
	_ = create.MarkFlagRequired("purpose")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show an actor: status, grants, balance, reserved energy",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) {
				return c.Actor(ctx, args[0])
			})
		},
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the actors you may see: yourself, those you created (root: everyone)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.with(cmd, func(ctx context.Context, c *client.Client) error {
				actors, err := c.Actors(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), actors)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tKIND\tNAME\tSTATUS\tBALANCE\tCREATOR\tPURPOSE")
				for _, a := range actors {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", a.ID, a.Kind, terminalSafe(a.Name), a.Status, a.Balance, a.Creator, terminalSafe(a.Purpose))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	agents.AddCommand(create, show, list)
	for verb, status := range map[string]string{"freeze": "frozen", "unfreeze": "active", "terminate": "terminated"} {
		var reason string
		c := &cobra.Command{
			Use:   verb + " ID [--reason TEXT]",
			Short: verb + " an agent (root or its creator)",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) {
					return c.SetStatus(ctx, args[0], status, reason)
				})
			},
		}
		c.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
		agents.AddCommand(c)
	}
	return agents
}

func whoamiCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show the actor whose credential you present",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) { return c.WhoAmI(ctx) })
		},
	}
}

// terminalSafe makes what an agent wrote inert on a terminal: control
// characters (escape sequences) and bidirectional overrides are shown as
// escapes, never interpreted.
func terminalSafe(s string) string { return inert.Text(s) }
