package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/agentmcp"
	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/cli"
	"github.com/annal-dev/annal/internal/sagarun"
	"github.com/annal-dev/annal/kernel/saga"
)

type sagaRunFlags struct {
	envelope   string
	mcpCommand []string
	mcpURL     []string
	holdWait   time.Duration
	follow     bool
	poll       time.Duration
}

func sagaRunCommand(g *globalFlags) *cobra.Command {
	var f sagaRunFlags
	cmd := &cobra.Command{
		Use:   "run SAGA [--mcp NAME=COMMAND]... [--mcp-url NAME=URL]...",
		Short: "Run a compensating saga's compensations in reverse order (§15.3), each an execute the kernel decides and records",
		Long: `annal sagas run is the saga orchestrator, acting with the credential of the saga's agent. While
the saga compensates, it takes the step the kernel names next (the latest completed step first),
reports it compensating, runs the compensation its spec names ("compensate") and reports it
compensated or compensation_failed:

  - {"argv": [...]}: the command, run as annal exec runs one (target exec/<command name>, an
    empty stdin, its output to annal's stderr);
  - {"server", "tool", "arguments"}: a call of the tool through the gate (target
    mcp/<server>/<tool>) to the MCP server named by --mcp NAME=COMMAND (started over stdio; the
    command is split at spaces) or --mcp-url NAME=URL (streamable HTTP).

Either way the kernel decides an execute intent before it runs (a held one waits for a human, up
to --hold-wait) and records its result after, in the saga's session. A compensation that fails is
tried again up to the step's max_retries, waiting 1 s, 2 s, ... between attempts (linear backoff,
§15.2); one the kernel does not allow is not tried again, and the saga ends failed. A step with no
"compensate" is its agent's to compensate: annal stops there. With --follow it first waits while
the saga is still running. It prints the saga's final state; it exits 1 if the saga ended failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSaga(cmd, g, &f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.envelope, "envelope", "", "the envelope compensations act under (default: the oldest that grants each)")
	fl.StringArrayVar(&f.mcpCommand, "mcp", nil, "NAME=COMMAND: the MCP server compensations name as NAME, started over stdio (repeatable)")
	fl.StringArrayVar(&f.mcpURL, "mcp-url", nil, "NAME=URL: the MCP server named NAME at a streamable HTTP endpoint (repeatable)")
	fl.DurationVar(&f.holdWait, "hold-wait", time.Hour, "how long a held compensation waits for a human")
	fl.BoolVar(&f.follow, "follow", false, "wait while the saga is still running, then compensate it if it must")
	fl.DurationVar(&f.poll, "poll", 2*time.Second, "with --follow, how often to read the saga's state")
	return cmd
}

func runSaga(cmd *cobra.Command, g *globalFlags, f *sagaRunFlags, id string) error {
	c, err := g.client(true)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	servers, err := f.upstreams()
	if err != nil {
		return err
	}
	raw, err := c.Saga(ctx, id)
	if err != nil {
		return err
	}
	var head struct {
		Session string `json:"session_id"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return fmt.Errorf("saga %s: %w", id, err)
	}
	r := &compensationRunner{g: g, c: c, f: f, session: head.Session, servers: servers, gates: map[string]*agentmcp.Gate{}, log: cmd.ErrOrStderr}
	defer r.close()
	o := &sagarun.Orchestrator{Kernel: c, Run: r.run, Follow: f.follow, Poll: f.poll}
	v, err := o.Compensate(ctx, id)
	if err != nil {
		return err
	}
	if raw, err = c.Saga(ctx, id); err != nil {
		return err
	}
	if err := printJSON(cmd.OutOrStdout(), raw); err != nil {
		return err
	}
	if v.State == saga.Failed {
		return &exitError{code: 1, msg: fmt.Sprintf("annal: saga %s ended failed: a compensation failed", id)}
	}
	return nil
}

// upstreams reads --mcp and --mcp-url: each server's transport by name.
func (f *sagaRunFlags) upstreams() (map[string]func() mcp.Transport, error) {
	servers := map[string]func() mcp.Transport{}
	add := func(flag, spec string, transport func(string) func() mcp.Transport) error {
		name, value, ok := strings.Cut(spec, "=")
		if !ok || name == "" || strings.TrimSpace(value) == "" {
			return fmt.Errorf("%s %q: NAME=VALUE", flag, spec)
		}
		if _, dup := servers[name]; dup {
			return fmt.Errorf("%s: server %s named twice", flag, name)
		}
		servers[name] = transport(value)
		return nil
	}
	for _, spec := range f.mcpCommand {
		if err := add("--mcp", spec, func(command string) func() mcp.Transport {
			argv := strings.Fields(command)
			return func() mcp.Transport { return &mcp.CommandTransport{Command: exec.Command(argv[0], argv[1:]...)} }
		}); err != nil {
			return nil, err
		}
	}
	for _, spec := range f.mcpURL {
		if err := add("--mcp-url", spec, func(url string) func() mcp.Transport {
			return func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: url} }
		}); err != nil {
			return nil, err
		}
	}
	return servers, nil
}

// compensationRunner runs compensations as executes: commands as annal
// exec runs them, tool calls through a gate to the named server (connected
// on first use).
type compensationRunner struct {
	g       *globalFlags
	c       *client.Client
	f       *sagaRunFlags
	session string
	servers map[string]func() mcp.Transport
	gates   map[string]*agentmcp.Gate
	log     func() io.Writer
}

func (r *compensationRunner) run(ctx context.Context, step string, comp *api.Compensate) (*sagarun.Outcome, error) {
	if len(comp.Argv) > 0 {
		return r.command(ctx, comp.Argv)
	}
	return r.toolCall(ctx, comp)
}

func (r *compensationRunner) command(ctx context.Context, argv []string) (*sagarun.Outcome, error) {
	e := &execution{argv: argv, target: execTarget(argv[0]), envelope: r.f.envelope, session: r.session, holdWait: r.f.holdWait,
		stdinOID: oid.Of(nil), stdout: r.log(), stderr: r.log()}
	ran, err := e.run(ctx, r.g, r.c)
	var exit *exitError
	if errors.As(err, &exit) && exit.code == exitNotAllowed {
		return nil, fmt.Errorf("%w: %s", sagarun.ErrNotAllowed, strings.TrimPrefix(exit.msg, "annal: "))
	} else if err != nil {
		return nil, err
	}
	return &sagarun.Outcome{Intent: ran.intent.Index, Result: ran.result.Index, ExitCode: int32(ran.code)}, nil
}

func (r *compensationRunner) toolCall(ctx context.Context, comp *api.Compensate) (*sagarun.Outcome, error) {
	gate, err := r.gate(ctx, comp.Server)
	if err != nil {
		return nil, err
	}
	args := json.RawMessage(comp.Arguments)
	if comp.Arguments == "" {
		args = nil
	}
	ex, err := gate.Execute(ctx, r.c, comp.Tool, args)
	if errors.Is(err, agentmcp.ErrNotMade) {
		return nil, fmt.Errorf("%w: %v", sagarun.ErrNotAllowed, err)
	} else if err != nil {
		return nil, err
	}
	return &sagarun.Outcome{Intent: ex.Intent, Result: ex.Result.Index, ExitCode: ex.ExitCode}, nil
}

// gate is the gate to server, connected on first use.
func (r *compensationRunner) gate(ctx context.Context, server string) (*agentmcp.Gate, error) {
	if g, ok := r.gates[server]; ok {
		return g, nil
	}
	transport, ok := r.servers[server]
	if !ok {
		return nil, fmt.Errorf("the compensation calls a tool of MCP server %q: name it with --mcp %s=COMMAND or --mcp-url %s=URL", server, server, server)
	}
	g, err := agentmcp.ConnectGate(ctx, transport(), agentmcp.GateConfig{Name: server, Envelope: r.f.envelope, Session: r.session,
		HoldWait: r.f.holdWait, Version: cli.Version()})
	if err != nil {
		return nil, err
	}
	r.gates[server] = g
	return g, nil
}

func (r *compensationRunner) close() {
	for _, g := range r.gates {
		g.Close()
	}
}
