package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/spf13/cobra"
)

// parseGrants reads PATTERN:ACTIONS flags, e.g. "workspace/**:create,mutate".
func parseGrants(flags []string) ([]api.Grant, error) {
	var out []api.Grant
	for _, f := range flags {
		i := strings.LastIndexByte(f, ':')
		if i <= 0 || i == len(f)-1 {
			return nil, fmt.Errorf("grant %q is not PATTERN:ACTIONS (e.g. 'workspace/**:create,mutate')", f)
		}
		out = append(out, api.Grant{Pattern: f[:i], Actions: strings.Split(f[i+1:], ",")})
	}
	return out, nil
}

func envelopesCommand(g *globalFlags) *cobra.Command {
	envs := &cobra.Command{Use: "envelopes", Short: "Issue, delegate, list and revoke envelopes"}
	var holder, parent, expires string
	var budget, timeout uint64
	var grants, holdOn []string
	var sealPayloads bool
	issue := &cobra.Command{
		Use:   "issue --holder AGENT --budget N --grant PATTERN:ACTIONS... [--hold-on PATTERN:ACTIONS]... [--parent ENV]",
		Short: "Issue an envelope to an agent (a human), or delegate part of one you hold (an agent, with --parent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gs, err := parseGrants(grants)
			if err != nil {
				return err
			}
			hs, err := parseGrants(holdOn)
			if err != nil {
				return err
			}
			c, err := g.client(true)
			if err != nil {
				return err
			}
			ctx, cancel := g.context(cmd)
			defer cancel()
			v, err := c.IssueEnvelope(ctx, api.EnvelopeRequest{Holder: holder, Parent: parent, Budget: budget, Grants: gs,
				HoldOn: hs, HoldTimeoutSecs: timeout, Expires: expires, SealPayloads: sealPayloads})
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), v)
		},
	}
	f := issue.Flags()
	f.StringVar(&holder, "holder", "", "the agent that will act under it")
	f.StringVar(&parent, "parent", "", "the envelope you delegate from (agents)")
	f.Uint64Var(&budget, "budget", 0, "energy the envelope may spend")
	f.StringArrayVar(&grants, "grant", nil, "what it allows, PATTERN:ACTIONS (repeatable)")
	f.StringArrayVar(&holdOn, "hold-on", nil, "what waits for a human's answer, PATTERN:ACTIONS (repeatable)")
	f.Uint64Var(&timeout, "hold-timeout", 0, "seconds before an unanswered hold times out (0: never)")
	f.StringVar(&expires, "expires", "", "when the envelope ends (RFC 3339)")
	f.BoolVar(&sealPayloads, "seal-payloads", false, "seal the payloads of actions under it (the log holds commitments, erasable by subject)")
	_ = issue.MarkFlagRequired("holder")
	_ = issue.MarkFlagRequired("grant")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the envelopes you hold or issued (all, for root)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) {
				return c.Envelopes(ctx)
			})
		},
	}
	var reason string
	revoke := &cobra.Command{
		Use:   "revoke ID [--reason TEXT]",
		Short: "Revoke an envelope and its sub-envelopes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) {
				return c.RevokeEnvelope(ctx, args[0], reason)
			})
		},
	}
	revoke.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
	envs.AddCommand(issue, list, revoke)
	return envs
}

func holdsCommand(g *globalFlags) *cobra.Command {
	holds := &cobra.Command{Use: "holds", Short: "List and answer held actions"}
	var status string
	list := &cobra.Command{
		Use:   "list [--status pending]",
		Short: "List holds you may see or answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) {
				return c.Holds(ctx, status)
			})
		},
	}
	list.Flags().StringVar(&status, "status", "pending", "pending, approved, rejected, timed_out, approve_failed, or '' for all")
	holds.AddCommand(list)
	for _, decision := range []string{"approve", "reject"} {
		var reason string
		c := &cobra.Command{
			Use:   decision + " HOLD-ID [--reason TEXT]",
			Short: decision + " a held action (humans only)",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) {
					return c.AnswerHold(ctx, args[0], decision, reason)
				})
			},
		}
		c.Flags().StringVar(&reason, "reason", "", "recorded in the log")
		holds.AddCommand(c)
	}
	return holds
}

// call runs one authenticated request and prints its answer as JSON.
func (g *globalFlags) call(cmd *cobra.Command, f func(context.Context, *client.Client) (any, error)) error {
	return g.with(cmd, func(ctx context.Context, c *client.Client) error {
		v, err := f(ctx, c)
		if err != nil {
			return err
		}
		return printJSON(cmd.OutOrStdout(), v)
	})
}

// with runs f with an authenticated client and the command's timeout.
func (g *globalFlags) with(cmd *cobra.Command, f func(context.Context, *client.Client) error) error {
	return g.withClient(cmd, true, f)
}

// read runs f with a client that needs no credential (the log's public
// reads) and the command's timeout.
func (g *globalFlags) read(cmd *cobra.Command, f func(context.Context, *client.Client) error) error {
	return g.withClient(cmd, false, f)
}

// withClient runs f with a client, authenticated or not, and the
// command's timeout.
func (g *globalFlags) withClient(cmd *cobra.Command, authenticated bool, f func(context.Context, *client.Client) error) error {
	c, err := g.client(authenticated)
	if err != nil {
		return err
	}
	ctx, cancel := g.context(cmd)
	defer cancel()
	return f(ctx, c)
}

func eraseCommand(g *globalFlags) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "erase SUBJECT [--reason TEXT]",
		Short: "Erase a data subject's sealed payloads (humans): the log records it and the kernel destroys the subject's key",
		Long: `Erase a data subject's sealed payloads. The log records a subject.erased event;
once it is durable the kernel destroys the subject's key and its payloads, which
become unreadable through the API, in bundles and in the data folder. Every entry,
proof and checkpoint stays valid: the log holds only salted commitments. Nothing
more may be sealed under the subject. This cannot be undone.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) {
				return c.EraseSubject(ctx, args[0], api.EraseRequest{Reason: reason})
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the log (e.g. the request's reference; not personal data)")
	return cmd
}
