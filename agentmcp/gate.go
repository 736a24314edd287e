package agentmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/format/oid"
	"github.com/annal-dev/annal/internal/execute"
)

// The gate: any MCP server, behind the kernel. A Gate holds one session to
// the real ("upstream") server and serves it to agents with every tool call
// decided by the kernel before it reaches the server:
//
//   - tools/list shows the upstream tools the agent could ever be allowed
//     (its grants and its own policies' blocked actions, asked of the
//     kernel), each as target mcp/<name>/<tool>; a tool not shown cannot be
//     called;
//   - a call of a tool typed execute (the default for a tool that is not
//     read-only) is an execute intent first: denied, the server never sees
//     it; held, it waits for a human (up to HoldWait); allowed, it is
//     forwarded, and the result's OID, isError (exit code 1) and size are
//     committed as the intent's result, whose receipt goes into the result's
//     _meta ("annal/receipt"). A result that cannot be committed is reported
//     to the agent as a failed call, without the server's answer;
//   - a call of a tool typed observe (read-only by its annotations) is
//     logged as an observe action before it is forwarded. The kernel logs
//     an observe without a grant; the gate shows a read-only tool only to
//     an agent granted observe on its target, since it still reads
//     something (the tools shown are re-read on every list change);
//   - when the kernel cannot be reached, nothing is forwarded (fail closed).
//
// Resources and prompts are passed through unchanged (reads the gate does
// not record); server-to-client requests (sampling, elicitation, roots) are
// not forwarded.

// MetaReceipt is the _meta member of a gated tool result holding its receipt.
const MetaReceipt = "annal/receipt"

// Arguments modes: how a call's arguments reach the log.
const (
	// ArgumentsInline logs the arguments in the intent (policies' patterns
	// can match them); a call whose arguments do not fit an entry is refused.
	ArgumentsInline = "inline"
	// ArgumentsHash logs only their OID (input_oid).
	ArgumentsHash = "hash"
)

// maxInlineArguments bounds the canonical arguments logged in an intent,
// well inside a log entry (65,535 bytes).
const maxInlineArguments = 48 << 10

// GateConfig configures a Gate.
type GateConfig struct {
	// Name is the server's name in targets: mcp/<Name>/<tool>.
	Name string
	// Types maps a tool to the action type its calls are (observe or
	// execute), over what its annotations say.
	Types map[string]string
	// Envelope and Session are what calls act under (default: the oldest
	// envelope that grants the call; no session).
	Envelope, Session string
	// HoldWait bounds how long a held call waits for a human.
	HoldWait time.Duration
	// Arguments is ArgumentsInline (default) or ArgumentsHash.
	Arguments string
	// KeepBlobs stores each call's canonical arguments and result on annald
	// (annald serve --keep-blobs) under their OIDs.
	KeepBlobs bool
	// Version is the gate's software version, for its MCP implementation.
	Version string
	Logger  *slog.Logger
}

var gateName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Gate is an upstream MCP server behind the kernel.
type Gate struct {
	cfg      GateConfig
	upstream *mcp.ClientSession

	mu        sync.Mutex
	tools     []*mcp.Tool
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
	prompts   []*mcp.Prompt
	servers   []*gatedServer // stdio: the live downstream servers, resynced on list changes
}

// ConnectGate connects to the upstream server over t and reads what it
// offers. Close the Gate to end the upstream session.
func ConnectGate(ctx context.Context, t mcp.Transport, cfg GateConfig) (*Gate, error) {
	if !gateName.MatchString(cfg.Name) {
		return nil, fmt.Errorf("gate name %q: 1 to 64 of A-Z a-z 0-9 . _ - (it names targets mcp/<name>/<tool>)", cfg.Name)
	}
	for tool, typ := range cfg.Types {
		if typ != "observe" && typ != "execute" {
			return nil, fmt.Errorf("tool %s: type %q; a gated call is observe or execute", tool, typ)
		}
	}
	switch cfg.Arguments {
	case "":
		cfg.Arguments = ArgumentsInline
	case ArgumentsInline, ArgumentsHash:
	default:
		return nil, fmt.Errorf("arguments %q: inline or hash", cfg.Arguments)
	}
	if cfg.HoldWait <= 0 {
		cfg.HoldWait = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Gate{cfg: cfg}
	// A list-changed notification can arrive while Connect is still
	// running: its refresh waits until the session is the Gate's.
	connected := make(chan struct{})
	resync := func(ctx context.Context) {
		go func() {
			if <-connected; g.upstream == nil {
				return // the connection failed
			}
			if err := g.refresh(context.WithoutCancel(ctx)); err != nil {
				cfg.Logger.Warn("gate: the upstream server's lists changed but could not be read again", "err", err)
			}
		}()
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "annal-gate", Version: cfg.Version}, &mcp.ClientOptions{
		ToolListChangedHandler:     func(ctx context.Context, _ *mcp.ToolListChangedRequest) { resync(ctx) },
		ResourceListChangedHandler: func(ctx context.Context, _ *mcp.ResourceListChangedRequest) { resync(ctx) },
		PromptListChangedHandler:   func(ctx context.Context, _ *mcp.PromptListChangedRequest) { resync(ctx) },
	})
	cs, err := c.Connect(ctx, t, nil)
	if err != nil {
		close(connected)
		return nil, fmt.Errorf("connect to the upstream MCP server: %w", err)
	}
	g.upstream = cs
	close(connected)
	if err := g.refresh(ctx); err != nil {
		cs.Close()
		return nil, err
	}
	return g, nil
}

// Close ends the upstream session.
func (g *Gate) Close() error { return g.upstream.Close() }

// refresh reads the upstream server's tools, resources and prompts again
// and updates the live downstream servers.
func (g *Gate) refresh(ctx context.Context) error {
	caps := g.upstream.InitializeResult().Capabilities
	var tools []*mcp.Tool
	var resources []*mcp.Resource
	var templates []*mcp.ResourceTemplate
	var prompts []*mcp.Prompt
	var err error
	if caps != nil && caps.Tools != nil {
		if tools, err = collect(g.upstream.Tools(ctx, nil), "tools"); err != nil {
			return err
		}
	}
	if caps != nil && caps.Resources != nil {
		if resources, err = collect(g.upstream.Resources(ctx, nil), "resources"); err != nil {
			return err
		}
		if templates, err = collect(g.upstream.ResourceTemplates(ctx, nil), "resource templates"); err != nil {
			return err
		}
	}
	if caps != nil && caps.Prompts != nil {
		if prompts, err = collect(g.upstream.Prompts(ctx, nil), "prompts"); err != nil {
			return err
		}
	}
	g.mu.Lock()
	g.tools, g.resources, g.templates, g.prompts = tools, resources, templates, prompts
	servers := slices.Clone(g.servers)
	g.mu.Unlock()
	for _, s := range servers {
		if err := s.sync(ctx); err != nil {
			g.cfg.Logger.Warn("gate: could not update the tools shown", "err", err)
		}
	}
	return nil
}

// collect gathers what an upstream list yields; what names the list in
// its error.
func collect[T any](list iter.Seq2[T, error], what string) ([]T, error) {
	var out []T
	for x, err := range list {
		if err != nil {
			return nil, fmt.Errorf("list the upstream %s: %w", what, err)
		}
		out = append(out, x)
	}
	return out, nil
}

// Target is the target of a call of tool: mcp/<name>/<tool>.
func (g *Gate) Target(tool string) string { return "mcp/" + g.cfg.Name + "/" + tool }

// typeOf is the action type of tool's calls: configured, else observe for
// a tool annotated read-only, else execute.
func (g *Gate) typeOf(t *mcp.Tool) string {
	if typ, ok := g.cfg.Types[t.Name]; ok {
		return typ
	}
	if t.Annotations != nil && t.Annotations.ReadOnlyHint {
		return "observe"
	}
	return "execute"
}

// gatedServer is the gate's MCP server for one agent (one kernel client).
type gatedServer struct {
	g      *Gate
	kernel *client.Client
	server *mcp.Server

	mu    sync.Mutex      // one sync at a time
	shown map[string]bool // tools registered now
}

// Server returns an MCP server that serves the upstream server to the agent
// whose credential kernel holds. With live set (stdio), it follows the
// upstream server's list changes for as long as the Gate lives.
func (g *Gate) Server(ctx context.Context, kernel *client.Client, live bool) (*mcp.Server, error) {
	instructions := "Every tool call passes through Annal, a kernel that decides and records it before it runs: " +
		"a call the kernel denies fails with the rule that refused it, a held call waits for a human, " +
		"and each result carries its receipt in _meta[\"" + MetaReceipt + "\"]."
	if up := g.upstream.InitializeResult().Instructions; up != "" {
		instructions = up + "\n\n" + instructions
	}
	s := &gatedServer{g: g, kernel: kernel, shown: map[string]bool{},
		server: mcp.NewServer(&mcp.Implementation{Name: "annal-gate/" + g.cfg.Name, Title: g.cfg.Name + " behind Annal", Version: g.cfg.Version},
			&mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{
				Tools: &mcp.ToolCapabilities{ListChanged: true}, Resources: &mcp.ResourceCapabilities{ListChanged: true},
				Prompts: &mcp.PromptCapabilities{ListChanged: true}}})}
	if err := s.sync(ctx); err != nil {
		return nil, err
	}
	if live {
		g.mu.Lock()
		g.servers = append(g.servers, s)
		g.mu.Unlock()
	}
	return s.server, nil
}

// sync registers the tools the agent could ever be allowed, and the
// upstream resources and prompts.
func (s *gatedServer) sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.g
	g.mu.Lock()
	tools, resources, templates, prompts := slices.Clone(g.tools), slices.Clone(g.resources), slices.Clone(g.templates), slices.Clone(g.prompts)
	g.mu.Unlock()
	names := make([]api.ActionName, len(tools))
	for i, t := range tools {
		names[i] = api.ActionName{Type: g.typeOf(t), Target: g.Target(t.Name)}
	}
	allowed := make([]api.MayEver, 0, len(names))
	for chunk := range slices.Chunk(names, api.MaxMayEver) {
		got, err := s.kernel.MayEver(ctx, chunk, true)
		if err != nil {
			return fmt.Errorf("ask the kernel which tools may be called: %w", err)
		}
		allowed = append(allowed, got...)
	}
	if len(allowed) != len(names) {
		return fmt.Errorf("the kernel answered %d of %d tools", len(allowed), len(names))
	}
	keep := map[string]bool{}
	for i, t := range tools {
		if !allowed[i].Allowed {
			continue
		}
		if !objectSchema(t.InputSchema) {
			g.cfg.Logger.Warn("gate: the upstream tool's input schema is not an object; the tool is not shown", "tool", t.Name)
			continue
		}
		keep[t.Name] = true
		shown := *t
		s.server.AddTool(&shown, s.callHandler(t.Name, names[i].Type))
	}
	var gone []string
	for name := range s.shown {
		if !keep[name] {
			gone = append(gone, name)
		}
	}
	s.server.RemoveTools(gone...)
	s.shown = keep
	for _, r := range resources {
		s.server.AddResource(r, s.readResource)
	}
	for _, t := range templates {
		s.server.AddResourceTemplate(t, s.readResource)
	}
	for _, p := range prompts {
		s.server.AddPrompt(p, s.getPrompt)
	}
	return nil
}

// objectSchema reports whether an input schema is a JSON object schema, as
// MCP requires (the SDK refuses to serve any other).
func objectSchema(schema any) bool {
	raw, err := json.Marshal(schema)
	if err != nil {
		return false
	}
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m["type"] == "object"
}

func (s *gatedServer) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return s.g.upstream.ReadResource(ctx, req.Params)
}

func (s *gatedServer) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return s.g.upstream.GetPrompt(ctx, req.Params)
}

// callHandler decides, forwards and records one tool's calls.
func (s *gatedServer) callHandler(tool, typ string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return s.call(ctx, tool, typ, req.Params.Arguments), nil
	}
}

// call decides, forwards and records one call of tool: an observe is
// recorded, then made; any other is decided as an intent (a held one
// waits for a human), made, and its result recorded.
func (s *gatedServer) call(ctx context.Context, tool, typ string, arguments json.RawMessage) *mcp.CallToolResult {
	about, inputOID, refused := s.prepare(ctx, tool, arguments)
	if refused != nil {
		return refused
	}
	if typ == "observe" {
		return s.observe(ctx, tool, arguments, about, inputOID)
	}
	return s.execute(ctx, tool, arguments, about, inputOID)
}

// prepare is what the log will say of a call of tool and its input's OID
// (the canonical call kept on annald with KeepBlobs), or the tool error of
// a call that cannot be logged.
func (s *gatedServer) prepare(ctx context.Context, tool string, arguments json.RawMessage) (map[string]any, string, *mcp.CallToolResult) {
	g := s.g
	input, err := execute.CanonicalToolCall(g.cfg.Name, tool, arguments)
	if err != nil {
		return nil, "", gateError("the arguments are not JSON: %v", err)
	}
	about, refused := g.about(tool, arguments, len(input))
	if refused != nil {
		return nil, "", refused
	}
	if g.cfg.KeepBlobs {
		s.keep(ctx, input)
	}
	return about, oid.Of(input), nil
}

// about is what the log says of a call of tool: the server and the tool,
// and with ArgumentsInline the arguments themselves ({} for none). A call
// whose arguments (inputLen bytes, canonical) are more than the log takes
// inline is refused, with the tool error to answer.
func (g *Gate) about(tool string, arguments json.RawMessage, inputLen int) (map[string]any, *mcp.CallToolResult) {
	about := map[string]any{"server": g.cfg.Name, "tool": tool}
	if g.cfg.Arguments != ArgumentsInline {
		return about, nil
	}
	if inputLen > maxInlineArguments {
		return nil, gateError("the call's arguments (%d bytes) are more than the log takes inline (%d); the gate must run with --arguments hash to log only their hash. The call was not made.", inputLen, maxInlineArguments)
	}
	var args json.RawMessage
	if len(arguments) > 0 && string(arguments) != "null" {
		args = arguments
	} else {
		args = json.RawMessage(`{}`)
	}
	about["arguments"] = args
	return about, nil
}

// observe records an observe of tool, then makes the call.
func (s *gatedServer) observe(ctx context.Context, tool string, arguments json.RawMessage, about map[string]any, inputOID string) *mcp.CallToolResult {
	g := s.g
	about["input_oid"] = inputOID
	payload, err := json.Marshal(about)
	if err != nil {
		return gateError("%v", err)
	}
	rc, err := s.kernel.Submit(ctx, api.ActionRequest{Type: "observe", Target: g.Target(tool), Payload: payload, Envelope: g.cfg.Envelope, Session: g.cfg.Session})
	if err != nil {
		return notMade(err)
	}
	res, err := s.forward(ctx, tool, arguments)
	if err != nil {
		return gateError("the server failed the call: %v", err)
	}
	return withReceipt(res, map[string]any{"observe": rc})
}

// execute decides the call of tool as an intent (waiting up to HoldWait
// for a human if it is held), makes it, and records its result.
func (s *gatedServer) execute(ctx context.Context, tool string, arguments json.RawMessage, about map[string]any, inputOID string) *mcp.CallToolResult {
	res, ex, err := s.executeCall(ctx, tool, arguments, about, inputOID)
	var nm *notMadeError
	switch {
	case errors.As(err, &nm):
		return notMade(nm.err)
	case err != nil:
		return gateError("%v", err)
	case ex.CallErr != nil:
		return gateError("the server failed the call: %v", ex.CallErr)
	}
	receipt := map[string]any{"intent": ex.Intent}
	if ex.HoldID != "" {
		receipt["hold_id"] = ex.HoldID
	}
	receipt["result"] = ex.Result
	return withReceipt(res, receipt)
}

// Executed is what the log holds of a call made as an execute: its intent
// (the approval's index when a human approved it), the result's receipt,
// and the exit code recorded (0, 1 for a tool error, -1 when the server
// answered no result; CallErr then says why).
type Executed struct {
	Intent   uint64
	HoldID   string
	Result   *api.Receipt
	ExitCode int32
	CallErr  error
}

// ErrNotMade is wrapped by the error of a call the server never saw: the
// kernel denied it, a human rejected it, or the kernel could not be asked.
var ErrNotMade = errors.New("the call was not made")

type notMadeError struct{ err error }

func (e *notMadeError) Error() string { return ErrNotMade.Error() + ": " + e.err.Error() }
func (e *notMadeError) Unwrap() []error {
	return []error{ErrNotMade, e.err}
}

// executeCall decides, makes and records one execute call. Its error wraps
// ErrNotMade when the call was not made; any other error means it was made
// but its result could not be recorded (its intent stays open).
func (s *gatedServer) executeCall(ctx context.Context, tool string, arguments json.RawMessage, about map[string]any, inputOID string) (*mcp.CallToolResult, *Executed, error) {
	g := s.g
	hctx, cancel := context.WithTimeout(ctx, g.cfg.HoldWait)
	defer cancel()
	intent, err := s.kernel.DecideIntent(hctx, g.Target(tool), g.cfg.Envelope, g.cfg.Session, inputOID, about, nil, 250*time.Millisecond)
	if err != nil {
		return nil, nil, &notMadeError{err}
	}
	res, callErr := s.forward(ctx, tool, arguments)
	output, exitCode := toolOutput(res, callErr)
	if g.cfg.KeepBlobs {
		s.keep(ctx, output)
	}
	outputOID := oid.Of(output)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer rcancel()
	rc, err := s.kernel.RecordResult(rctx, intent, execute.Result{OutputOID: outputOID, ArtifactHash: outputOID, ExitCode: exitCode, OutputBytes: uint64(len(output))})
	if err != nil {
		return nil, nil, fmt.Errorf("the tool ran, but its result could not be recorded (intent %d stays open in the log), so the call is reported as failed: %v", intent.Index, err)
	}
	return res, &Executed{Intent: intent.Index, HoldID: intent.HoldID, Result: rc, ExitCode: exitCode, CallErr: callErr}, nil
}

// Execute makes one call of tool as an execute on behalf of the agent whose
// credential kernel holds, whatever the tool's type: decided (and held for
// a human) before the server sees it, its result recorded after, exactly as
// an agent's call through the gate. annal sagas run makes a step's
// compensation this way. The error wraps ErrNotMade when the call was not
// made.
func (g *Gate) Execute(ctx context.Context, kernel *client.Client, tool string, arguments json.RawMessage) (*Executed, error) {
	s := &gatedServer{g: g, kernel: kernel}
	about, inputOID, refused := s.prepare(ctx, tool, arguments)
	if refused != nil {
		r, _ := refused.StructuredContent.(Refusal)
		return nil, &notMadeError{errors.New(r.Error)}
	}
	_, ex, err := s.executeCall(ctx, tool, arguments, about, inputOID)
	return ex, err
}

// toolOutput is the output and exit code the log records of a call: the
// canonical result, exit code 0, or 1 for a tool error. A server that
// answered no result is recorded as exit code -1, the output the error
// the gate saw; a result that cannot be encoded as -1 too.
func toolOutput(res *mcp.CallToolResult, callErr error) ([]byte, int32) {
	if callErr != nil {
		output, _ := json.Marshal(map[string]string{"error": callErr.Error()})
		return output, -1
	}
	raw, err := json.Marshal(res)
	var output []byte
	if err == nil {
		output, err = execute.CanonicalToolResult(raw)
	}
	if err != nil {
		return []byte(`{"error":"the result could not be encoded"}`), -1
	}
	if res.IsError {
		return output, 1
	}
	return output, 0
}

// forward sends the call upstream, arguments unchanged.
func (s *gatedServer) forward(ctx context.Context, tool string, arguments json.RawMessage) (*mcp.CallToolResult, error) {
	var args any
	if len(arguments) > 0 {
		args = arguments
	}
	return s.g.upstream.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

func (s *gatedServer) keep(ctx context.Context, data []byte) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := s.kernel.PutBlob(ctx, data); err != nil {
		s.g.cfg.Logger.Warn("gate: --keep-blobs", "err", err)
	}
}

func withReceipt(res *mcp.CallToolResult, receipt map[string]any) *mcp.CallToolResult {
	meta := maps.Clone(res.Meta)
	if meta == nil {
		meta = mcp.Meta{}
	}
	meta[MetaReceipt] = receipt
	res.Meta = meta
	return res
}

// notMade is the tool error of a call the kernel did not allow (or could
// not be asked about): the server never saw it.
func notMade(err error) *mcp.CallToolResult {
	var refused *client.HoldRefusedError
	if errors.As(err, &refused) {
		return gateError("a human did not approve this call (%v). The call was not made; do not retry it unchanged.", err)
	}
	var e *client.Error
	if errors.As(err, &e) {
		r := refusal(err)
		if t, ok := r.Content[0].(*mcp.TextContent); ok {
			t.Text += " The call was not made."
		}
		return r
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return gateError("no human answered the held call in time. The call was not made.")
	}
	return gateError("the kernel could not decide the call, so it was not made: %v", err)
}

func gateError(format string, args ...any) *mcp.CallToolResult {
	text := fmt.Sprintf(format, args...)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: Refusal{Error: text}}
}

// GateHTTPHandler serves the gate over streamable HTTP: each request
// authenticates with an agent's bearer credential and is served, statelessly,
// by a gated server acting with it against annald at kernelURL.
func (g *Gate) GateHTTPHandler(kernelURL string, httpClient *http.Client) http.Handler {
	newClient := func(cred string) (*client.Client, error) {
		c, err := client.New(kernelURL, cred)
		if err != nil {
			return nil, err
		}
		if httpClient != nil {
			c = c.WithHTTPClient(httpClient)
		}
		return c, nil
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		c, err := newClient(bearer(r))
		if err != nil {
			return nil
		}
		s, err := g.Server(r.Context(), c, false)
		if err != nil {
			g.cfg.Logger.Warn("gate: cannot serve the request", "err", err)
			return nil
		}
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred := bearer(r)
		if cred == "" {
			unauthorized(w, "send \"Authorization: Bearer <credential>\": the gate acts with the agent's credential")
			return
		}
		c, err := newClient(cred)
		if err == nil {
			_, err = c.WhoAmI(r.Context())
		}
		if err != nil {
			if client.IsStatus(err, http.StatusUnauthorized) {
				unauthorized(w, "the credential belongs to no actor")
				return
			}
			http.Error(w, "the kernel cannot be reached: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBody)
		mcpHandler.ServeHTTP(w, r)
	})
}
