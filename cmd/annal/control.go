package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/strictjson"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/spf13/cobra"
)

// The execution control commands: rings, descriptors, elevations,
// sessions, the kill switch, quarantine, signals, sagas and policies.

// leaf builds a command that makes one authenticated call and prints it.
func leaf(g *globalFlags, use, short string, args cobra.PositionalArgs, call func(ctx context.Context, c *client.Client, args []string) (any, error)) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, RunE: func(cmd *cobra.Command, a []string) error {
		return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) { return call(ctx, c, a) })
	}}
}

// readJSONArg reads JSON given inline or, as @FILE, from a file.
func readJSONArg(s string) (json.RawMessage, error) {
	raw := []byte(s)
	if name, ok := strings.CutPrefix(s, "@"); ok {
		var err error
		if raw, err = os.ReadFile(name); err != nil {
			return nil, err
		}
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%q is not valid JSON", s)
	}
	return raw, nil
}

func ringsCommand(g *globalFlags) *cobra.Command {
	rings := &cobra.Command{Use: "rings", Short: "Execution rings: list agents' rings, assign trust, configure Ring 2's network allowlist"}
	var trust float64
	var consensus bool
	var demote int
	var reason string
	assign := leaf(g, "assign AGENT --trust SCORE [--consensus] [--ring N]", "Record an agent's trust score (0–1) and the ring it gives (>0.95 with consensus: 1, >0.60: 2, else 3)", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			req := api.RingRequest{Trust: trust, Consensus: consensus, Reason: reason}
			if demote >= 0 {
				req.Ring = &demote
			}
			return c.AssignRing(ctx, args[0], req)
		})
	assign.Flags().Float64Var(&trust, "trust", 0, "effective trust score, 0 to 1")
	assign.Flags().BoolVar(&consensus, "consensus", false, "the score has consensus (Ring 1 needs it)")
	assign.Flags().IntVar(&demote, "ring", -1, "a less privileged ring than the score gives (demotion)")
	assign.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
	_ = assign.MarkFlagRequired("trust")
	var allow []string
	config := leaf(g, "config --allow HOST[:PORT]...", "Set where Ring 2 agents may connect (root); no --allow: nowhere", cobra.NoArgs,
		func(ctx context.Context, c *client.Client, _ []string) (any, error) {
			return c.ConfigureRings(ctx, allow)
		})
	config.Flags().StringArrayVar(&allow, "allow", nil, "host, host:port or *.domain (repeatable)")
	rings.AddCommand(leaf(g, "list", "List the agents you oversee: base and effective ring, elevations, constraints", cobra.NoArgs,
		func(ctx context.Context, c *client.Client, _ []string) (any, error) { return c.Rings(ctx) }), assign, config)
	return rings
}

func descriptorsCommand(g *globalFlags) *cobra.Command {
	ds := &cobra.Command{Use: "descriptors", Short: "Action descriptors: what ring an action needs (§5)"}
	var descriptor string
	var appliesTo []string
	register := leaf(g, "register --descriptor JSON|@FILE --applies-to PATTERN:ACTIONS...", "Register an action descriptor and the actions it classifies (root)", cobra.NoArgs,
		func(ctx context.Context, c *client.Client, _ []string) (any, error) {
			raw, err := readJSONArg(descriptor)
			if err != nil {
				return nil, err
			}
			// The path names the descriptor by its "action_id", spelt
			// exactly: the server refuses any other spelling, so the
			// path must not be taken from one.
			var members map[string]json.RawMessage
			var id string
			if json.Unmarshal(raw, &members) != nil || json.Unmarshal(members["action_id"], &id) != nil {
				return nil, fmt.Errorf("the descriptor is not a JSON object with a string \"action_id\"")
			}
			gs, err := parseGrants(appliesTo)
			if err != nil {
				return nil, err
			}
			return c.RegisterDescriptor(ctx, id, api.DescriptorRequest{Descriptor: raw, AppliesTo: gs})
		})
	register.Flags().StringVar(&descriptor, "descriptor", "", "the descriptor's JSON (action_id, name, execute_api, reversibility, is_read_only, is_admin, ...), or @FILE")
	register.Flags().StringArrayVar(&appliesTo, "applies-to", nil, "actions it classifies, PATTERN:ACTIONS (repeatable)")
	_ = register.MarkFlagRequired("descriptor")
	_ = register.MarkFlagRequired("applies-to")
	ds.AddCommand(register, leaf(g, "list", "List the registered descriptors", cobra.NoArgs,
		func(ctx context.Context, c *client.Client, _ []string) (any, error) { return c.Descriptors(ctx) }))
	return ds
}

func elevateCommand(g *globalFlags) *cobra.Command {
	var ringFlag int
	var ttl time.Duration
	var session, reason string
	el := leaf(g, "elevate AGENT --ring N --reason TEXT [--ttl 5m] [--session S]",
		"Elevate an agent for a while (§8): an agent may ask for Ring 2 itself; Ring 1 needs a human who oversees it to ask; Ring 0 never", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			return c.Elevate(ctx, api.ElevationRequest{Agent: args[0], Session: session, Ring: ringFlag, TTLSeconds: int64(ttl / time.Second), Reason: reason})
		})
	el.Flags().IntVar(&ringFlag, "ring", 2, "the ring to elevate to")
	el.Flags().DurationVar(&ttl, "ttl", 0, "how long (default 5m, at most 1h)")
	el.Flags().StringVar(&session, "session", "", "limit the elevation to a session")
	el.Flags().StringVar(&reason, "reason", "", "why (required)")
	_ = el.MarkFlagRequired("reason")
	var why string
	revoke := leaf(g, "revoke ELEVATION-ID", "End an elevation now", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			return c.RevokeElevation(ctx, args[0], why)
		})
	revoke.Flags().StringVar(&why, "reason", "", "why, recorded in the log")
	el.AddCommand(revoke)
	return el
}

func sessionsCommand(g *globalFlags) *cobra.Command {
	ss := &cobra.Command{Use: "sessions", Short: "Sessions: create, move through their states, join, grant, record deltas, roll back"}
	var id, config string
	create := leaf(g, "create [--id ID] [--config JSON|@FILE]", "Create a session (CREATED); config per §10.2, e.g. '{\"isolation\":\"READ_COMMITTED\",\"max_participants\":4}'", cobra.NoArgs,
		func(ctx context.Context, c *client.Client, _ []string) (any, error) {
			req := api.SessionRequest{ID: id}
			if config != "" {
				raw, err := readJSONArg(config)
				if err != nil {
					return nil, err
				}
				req.Config = raw
			}
			return c.CreateSession(ctx, req)
		})
	create.Flags().StringVar(&id, "id", "", "session id (default: generated)")
	create.Flags().StringVar(&config, "config", "", "configuration JSON or @FILE")
	var reason string
	change := func(use, short string, nargs int, build func(args []string) api.SessionChangeRequest) *cobra.Command {
		c := leaf(g, use, short, cobra.ExactArgs(nargs), func(ctx context.Context, c *client.Client, args []string) (any, error) {
			req := build(args)
			req.Reason = reason
			return c.ChangeSession(ctx, args[0], req)
		})
		c.Flags().StringVar(&reason, "reason", "", "why, recorded in the log")
		return c
	}
	state := change("state ID STATE", "Move a session to HANDSHAKING, ACTIVE, TERMINATING or ARCHIVED", 2,
		func(a []string) api.SessionChangeRequest {
			return api.SessionChangeRequest{Op: "state", State: strings.ToUpper(a[1])}
		})
	var agent string
	join := change("join ID [--agent AGENT]", "Join a session (an agent itself, or its creator for it)", 1,
		func(a []string) api.SessionChangeRequest { return api.SessionChangeRequest{Op: "join", Agent: agent} })
	join.Flags().StringVar(&agent, "agent", "", "the agent to admit (default: you)")
	leave := change("leave ID [--agent AGENT]", "Leave a session", 1,
		func(a []string) api.SessionChangeRequest { return api.SessionChangeRequest{Op: "leave", Agent: agent} })
	leave.Flags().StringVar(&agent, "agent", "", "the agent that leaves (default: you)")
	grant := change("grant ID OTHER", "Let session ID read session OTHER (READ_COMMITTED only, §11.5)", 2,
		func(a []string) api.SessionChangeRequest { return api.SessionChangeRequest{Op: "grant", Granted: a[1]} })
	substitute := change("substitute ID AGENT", "Register the agent that takes over a killed agent's steps (§12.3)", 2,
		func(a []string) api.SessionChangeRequest {
			return api.SessionChangeRequest{Op: "substitute", Agent: a[1]}
		})
	lock := change("lock ID PATH", "Take an intent lock on a path of a SERIALIZABLE session's folder (a file, or a folder and all below it): others' writes there are refused until it is released (§11.1)", 2,
		func(a []string) api.SessionChangeRequest { return api.SessionChangeRequest{Op: "lock", Path: a[1]} })
	unlock := change("unlock ID PATH", "Release an intent lock (its holder, or the session's owner)", 2,
		func(a []string) api.SessionChangeRequest { return api.SessionChangeRequest{Op: "unlock", Path: a[1]} })
	var head string
	ack := change("ack ID [--head HASH]", "Acknowledge a STRONG session's files at its chain head: its files change only once every participant has (§10.4)", 1,
		func(a []string) api.SessionChangeRequest { return api.SessionChangeRequest{Op: "ack", Head: head} })
	ack.Flags().StringVar(&head, "head", "", "the delta hash acknowledged (default: the session's head when decided)")
	var turn string
	var changes []string
	deltaCmd := leaf(g, "delta ID --turn TURN --change OP:PATH[:sha256:HEX]...", "Record one turn's file changes (create|modify|delete) as a SemanticDelta", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			req := api.DeltaRequest{TurnID: turn}
			for _, ch := range changes {
				op, rest, ok := strings.Cut(ch, ":")
				if !ok {
					return nil, fmt.Errorf("change %q is not OP:PATH[:sha256:HEX]", ch)
				}
				path, hash, _ := strings.Cut(rest, ":sha256:")
				if hash != "" {
					hash = "sha256:" + hash
				}
				req.Changes = append(req.Changes, api.Change{Operation: op, Path: path, ContentHash: hash})
			}
			return c.AppendDelta(ctx, args[0], req)
		})
	deltaCmd.Flags().StringVar(&turn, "turn", "", "the turn id")
	deltaCmd.Flags().StringArrayVar(&changes, "change", nil, "OP:PATH[:sha256:HEX], e.g. create:src/a.go:sha256:9f86… (repeatable)")
	_ = deltaCmd.MarkFlagRequired("turn")
	rollback := leaf(g, "rollback ID --turn TURN", "Reconstruct a session's files after a turn, and the changes that restore them", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			return c.Rollback(ctx, args[0], turn)
		})
	rollback.Flags().StringVar(&turn, "turn", "", "the turn to roll back to")
	_ = rollback.MarkFlagRequired("turn")
	ss.AddCommand(create, state, join, leave, grant, substitute, lock, unlock, ack, deltaCmd, rollback,
		leaf(g, "list", "List your sessions", cobra.NoArgs, func(ctx context.Context, c *client.Client, _ []string) (any, error) { return c.Sessions(ctx) }),
		leaf(g, "show ID", "Show a session", cobra.ExactArgs(1), func(ctx context.Context, c *client.Client, a []string) (any, error) { return c.Session(ctx, a[0]) }),
		leaf(g, "chain ID", "Show a session's delta chain with log indices", cobra.ExactArgs(1), func(ctx context.Context, c *client.Client, a []string) (any, error) { return c.Deltas(ctx, a[0]) }))
	return ss
}

func killCommand(g *globalFlags) *cobra.Command {
	var reason, session, details string
	k := leaf(g, "kill AGENT --reason REASON [--session S]", "Kill an agent (§12): hand off or compensate its steps, freeze it, revoke its envelopes", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			return c.Kill(ctx, args[0], api.KillRequest{Reason: reason, Session: session, Details: details})
		})
	k.Flags().StringVar(&reason, "reason", "manual", "behavioral_drift, rate_limit, ring_breach, manual, quarantine_timeout or session_timeout")
	k.Flags().StringVar(&session, "session", "", "the session whose substitute takes the agent's steps")
	k.Flags().StringVar(&details, "details", "", "recorded in the log")
	return k
}

func quarantineCommand(g *globalFlags) *cobra.Command {
	var reason, session string
	var duration time.Duration
	q := leaf(g, "quarantine AGENT --reason REASON [--session S] [--duration 5m]", "Quarantine an agent: its actions are denied until release or expiry (§13)", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			return c.Quarantine(ctx, args[0], api.QuarantineRequest{Reason: reason, Session: session, DurationSeconds: int64(duration / time.Second)})
		})
	q.Flags().StringVar(&reason, "reason", "manual", "behavioral_drift, liability_violation, ring_breach, rate_limit_exceeded, manual or cascade_slash")
	q.Flags().StringVar(&session, "session", "", "limit it to one session (default: all)")
	q.Flags().DurationVar(&duration, "duration", 0, "how long (default 5m)")
	var why string
	release := leaf(g, "release AGENT [--session S]", "End an agent's quarantine", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			return c.Release(ctx, args[0], api.ReleaseRequest{Session: session, Reason: why})
		})
	release.Flags().StringVar(&session, "session", "", "the session it was quarantined in")
	release.Flags().StringVar(&why, "reason", "", "why, recorded in the log")
	q.AddCommand(release, leaf(g, "list", "List quarantines", cobra.NoArgs,
		func(ctx context.Context, c *client.Client, _ []string) (any, error) { return c.Quarantines(ctx) }))
	return q
}

func signalCommand(g *globalFlags) *cobra.Command {
	var reason string
	s := leaf(g, "signal AGENT SIGNAL [--reason TEXT]", "Send SIGSTOP, SIGCONT, SIGINT, SIGTERM, SIGKILL, SIGPOLICY or SIGTRUST to an agent", cobra.ExactArgs(2),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			return c.Signal(ctx, args[0], api.SignalRequest{Signal: args[1], Reason: reason})
		})
	s.Flags().StringVar(&reason, "reason", "", "recorded in the log")
	s.AddCommand(
		leaf(g, "mask [SIGNAL]...", "Set the maskable signals you (an agent) handle yourself", cobra.ArbitraryArgs,
			func(ctx context.Context, c *client.Client, args []string) (any, error) {
				return c.SetSignalMask(ctx, args)
			}),
		leaf(g, "queued", "Show the signals queued for you (an agent)", cobra.NoArgs,
			func(ctx context.Context, c *client.Client, _ []string) (any, error) { return c.Signals(ctx) }))
	return s
}

func sagasCommand(g *globalFlags) *cobra.Command {
	ss := &cobra.Command{Use: "sagas", Short: "Sagas: multi-step work with retries and reverse-order compensation (§15)"}
	var spec string
	start := leaf(g, "start --spec JSON|@FILE", "Start a saga (an agent): {\"id\":..., \"session\":..., \"steps\":[{\"id\",\"action\",\"compensation\",\"compensate\"?}]}", cobra.NoArgs,
		func(ctx context.Context, c *client.Client, _ []string) (any, error) {
			raw, err := readJSONArg(spec)
			if err != nil {
				return nil, err
			}
			var req api.SagaRequest
			if err := strictjson.Decode(raw, &req); err != nil {
				return nil, fmt.Errorf("--spec: %w", err)
			}
			return c.StartSaga(ctx, req)
		})
	start.Flags().StringVar(&spec, "spec", "", "the saga as JSON, or @FILE")
	_ = start.MarkFlagRequired("spec")
	var reason string
	report := leaf(g, "report SAGA STEP TRANSITION", "Report a step: started, succeeded, failed, compensating, compensated or compensation_failed", cobra.ExactArgs(3),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			return c.ReportStep(ctx, args[0], args[1], api.StepReport{Transition: args[2], Reason: reason})
		})
	report.Flags().StringVar(&reason, "reason", "", "why a step failed")
	ss.AddCommand(start, report, sagaRunCommand(g),
		leaf(g, "list", "List sagas", cobra.NoArgs, func(ctx context.Context, c *client.Client, _ []string) (any, error) { return c.Sagas(ctx) }),
		leaf(g, "show ID", "Show a saga and its next move", cobra.ExactArgs(1), func(ctx context.Context, c *client.Client, a []string) (any, error) { return c.Saga(ctx, a[0]) }))
	return ss
}

func policiesCommand(g *globalFlags) *cobra.Command {
	ps := &cobra.Command{Use: "policies", Short: "Policies: blocked actions and payload patterns, attached to agents or envelopes"}
	var spec string
	var def bool
	set := leaf(g, "set NAME (--spec JSON|@FILE | --default)", "Define or change a policy; --default writes the Agent OS policy of that name (read_only, no_pii, strict, audit)", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			if def {
				return c.SetDefaultPolicy(ctx, args[0])
			}
			raw, err := readJSONArg(spec)
			if err != nil {
				return nil, err
			}
			return c.SetPolicy(ctx, args[0], raw)
		})
	set.Flags().StringVar(&spec, "spec", "", "{\"name\",\"blocked_actions\",\"blocked_patterns\",\"signal_on_violation\",\"allowed_tools\"} or @FILE")
	set.Flags().BoolVar(&def, "default", false, "use the Agent OS default policy of this name")
	var agent, envelope string
	var detach bool
	attach := leaf(g, "attach NAME (--agent AGENT | --envelope ENV) [--detach]", "Bind a policy to an agent or an envelope (or unbind it)", cobra.ExactArgs(1),
		func(ctx context.Context, c *client.Client, args []string) (any, error) {
			return c.AttachPolicy(ctx, args[0], api.AttachRequest{Agent: agent, Envelope: envelope, Detach: detach})
		})
	attach.Flags().StringVar(&agent, "agent", "", "the agent")
	attach.Flags().StringVar(&envelope, "envelope", "", "the envelope")
	attach.Flags().BoolVar(&detach, "detach", false, "unbind instead")
	var importName, importServer string
	var dryRun, denyOnly bool
	importCmd := &cobra.Command{
		Use:   "import FILE|DIR [--name NAME] [--mcp-server NAME] [--deny-only] [--dry-run]",
		Short: "Turn an AGENTS.md file's (or a directory's such as .agents/) rules (blocked actions, blocked patterns, allowed tools) into a policy version in the log",
		Long: `annal policies import reads the list items under an AGENTS.md's "Blocked actions", "Blocked patterns"
and "Allowed tools" (or "Tools to allow") headings — an item's first ` + "`code span`" + `, else its text — and
defines them as the policy NAME (default agents-md; a new version if it exists). Allowed tools are
MCP targets mcp/<server>/<tool> and close that server to every other tool; with --mcp-server a bare
tool name is taken as that server's (said on stderr). Every other section, and every line of a rule
section that is not a list item, is reported on stderr and not imported. --dry-run prints the
policy without defining it. Attach it with annal policies attach NAME --agent AGENT.

Given a directory (seed 002's parse_directory(".agents/")), it reads every *.md file at its top
level in name order and merges their rules into the one policy; a file that states no rule is
reported, not an error.

As in seed 002 ("If ANY check fails → SIGKILL"), an agent that breaks the policy is denied and
terminated; with --deny-only a violation only denies (the policy's signal_on_violation is false).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, notes, err := readAgentsRules(args[0], importName, importServer)
			for _, n := range notes {
				g.notef("annal: %s:%s", args[0], n)
			}
			if err != nil {
				return err
			}
			p.SignalOnViolation = !denyOnly
			raw, err := json.Marshal(p)
			if err != nil {
				return err
			}
			if dryRun {
				return printJSON(cmd.OutOrStdout(), json.RawMessage(raw))
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) (any, error) { return c.SetPolicy(ctx, p.Name, raw) })
		},
	}
	importCmd.Flags().StringVar(&importName, "name", "agents-md", "the policy's name")
	importCmd.Flags().StringVar(&importServer, "mcp-server", "", "the MCP server (as annal mcp-gate --name) bare tool names belong to")
	importCmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the policy; define nothing")
	importCmd.Flags().BoolVar(&denyOnly, "deny-only", false, "a violation only denies; the agent is not terminated")
	ps.AddCommand(importCmd)
	ps.AddCommand(set, attach, leaf(g, "list", "List policies", cobra.NoArgs,
		func(ctx context.Context, c *client.Client, _ []string) (any, error) { return c.Policies(ctx) }))
	return ps
}

// readAgentsRules reads the rules of an AGENTS.md file, or of every
// Markdown file of a directory (policy.ParseAgentsDir).
func readAgentsRules(from, name, mcpServer string) (policy.Policy, []policy.AgentsMDNote, error) {
	fi, err := os.Stat(from)
	if err != nil {
		return policy.Policy{}, nil, err
	}
	if fi.IsDir() {
		return policy.ParseAgentsDir(os.DirFS(from), name, mcpServer)
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return policy.Policy{}, nil, err
	}
	return policy.ParseAgentsMD(data, name, mcpServer)
}
