package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/agentmcp"
	"github.com/annal-dev/annal/internal/cli"
)

type gateFlags struct {
	name, envelope, session string
	types                   []string
	holdWait                time.Duration
	arguments               string
	keepBlobs               bool
	listen                  string
	upstreamURL             string
	upstreamHeaders         []string
}

func gateCommand(g *globalFlags) *cobra.Command {
	var f gateFlags
	cmd := &cobra.Command{
		Use:   "mcp-gate --name NAME [flags] -- COMMAND [ARGS...] | --upstream-url URL",
		Short: "Put an MCP server behind the kernel: every tool call is decided (or held for a human) before the server sees it, and its result recorded",
		Long: `annal mcp-gate speaks MCP to an agent and to a real MCP server: the server it starts (COMMAND, over
stdio) or one at --upstream-url (streamable HTTP). It passes everything through except tool calls:

  - tools/list shows only the tools the agent could ever be allowed (its grants, its policies);
  - each call is an action on target mcp/<NAME>/<tool> before it reaches the server: a read-only
    tool (by its annotations) an observe, any other an execute intent (--type TOOL=observe|execute
    overrides), input_oid the SHA-256 of the canonical {arguments, server, tool}, the arguments
    logged unless --arguments hash;
  - denied: the server never sees the call; held: it waits for a human (--hold-wait); allowed: the
    result's SHA-256, isError (exit code 1) and size are committed as the intent's result, and the
    receipts go into the result's _meta["annal/receipt"];
  - if the kernel cannot be reached, or the result cannot be recorded, the call fails.

Over stdio (the default) the gate acts with the credential of --credential, --credential-file,
ANNAL_CREDENTIAL or ANNAL_CREDENTIAL_FILE. With --listen ADDR it serves streamable HTTP at /mcp
instead, each request acting with its own "Authorization: Bearer" credential.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGate(cmd, g, &f, args)
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false)
	fl.StringVar(&f.name, "name", "", "the server's name in targets mcp/<name>/<tool> (required)")
	fl.StringArrayVar(&f.types, "type", nil, "TOOL=observe|execute: the action type of a tool's calls (repeatable)")
	fl.StringVar(&f.envelope, "envelope", "", "the envelope calls act under (default: the oldest that grants each)")
	fl.StringVar(&f.session, "session", "", "the session calls run in")
	fl.DurationVar(&f.holdWait, "hold-wait", 10*time.Minute, "how long a held call waits for a human")
	fl.StringVar(&f.arguments, "arguments", agentmcp.ArgumentsInline, "log the calls' arguments inline (policies can match them) or only their hash")
	fl.BoolVar(&f.keepBlobs, "keep-blobs", false, "store each call's canonical arguments and result on annald under their OIDs")
	fl.StringVar(&f.listen, "listen", "", "serve streamable HTTP at ADDR/mcp instead of stdio (e.g. 127.0.0.1:7430)")
	fl.StringVar(&f.upstreamURL, "upstream-url", "", "the upstream server's streamable HTTP endpoint, instead of COMMAND")
	fl.StringArrayVar(&f.upstreamHeaders, "upstream-header", nil, "'Name: value' sent to --upstream-url (repeatable)")
	return cmd
}

func runGate(cmd *cobra.Command, g *globalFlags, f *gateFlags, command []string) error {
	if f.name == "" {
		return errors.New("--name is required: it names the targets mcp/<name>/<tool> that grants and policies are written against")
	}
	types := map[string]string{}
	for _, t := range f.types {
		tool, typ, ok := strings.Cut(t, "=")
		if !ok || tool == "" {
			return fmt.Errorf("--type %q: TOOL=observe or TOOL=execute", t)
		}
		types[tool] = typ
	}
	var upstream mcp.Transport
	switch {
	case f.upstreamURL != "" && len(command) > 0:
		return errors.New("give COMMAND or --upstream-url, not both")
	case f.upstreamURL != "":
		headers := http.Header{}
		for _, h := range f.upstreamHeaders {
			name, value, ok := strings.Cut(h, ":")
			if !ok {
				return fmt.Errorf("--upstream-header %q: 'Name: value'", h)
			}
			headers.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
		upstream = &mcp.StreamableClientTransport{Endpoint: f.upstreamURL, HTTPClient: &http.Client{Transport: headerTransport{headers}}}
	case len(command) > 0:
		server := exec.Command(command[0], command[1:]...)
		server.Stderr = cmd.ErrOrStderr() // the server's own log, as the host would see it
		upstream = &mcp.CommandTransport{Command: server}
	default:
		return errors.New("name the MCP server: -- COMMAND [ARGS...] or --upstream-url URL")
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := cmd.Context()
	gate, err := agentmcp.ConnectGate(ctx, upstream, agentmcp.GateConfig{Name: f.name, Types: types, Envelope: f.envelope, Session: f.session,
		HoldWait: f.holdWait, Arguments: f.arguments, KeepBlobs: f.keepBlobs, Version: cli.Version(), Logger: logger})
	if err != nil {
		return err
	}
	defer gate.Close()
	if f.listen != "" {
		return serveGate(ctx, g, gate, f.listen)
	}
	c, err := g.client(true)
	if err != nil {
		return err
	}
	server, err := gate.Server(ctx, c, true)
	if err != nil {
		return err
	}
	return server.Run(ctx, &mcp.StdioTransport{})
}

// serveGate serves the gate over streamable HTTP at addr/mcp until ctx ends.
func serveGate(ctx context.Context, g *globalFlags, gate *agentmcp.Gate, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", gate.GateHTTPHandler(g.server, nil))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g.notef("annal mcp-gate: serving http://%s/mcp", ln.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// headerTransport adds fixed headers to every request (--upstream-header).
type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for name, values := range t.h {
			r.Header[name] = values
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}
