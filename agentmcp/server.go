// Package agentmcp puts the kernel where agents reach their tools: the
// Model Context Protocol (the official Go SDK).
//
// NewServer is the kernel as an MCP server. Its tools submit actions (and
// wait for a hold's answer or a proof), report the caller's budget and
// record session turns; its resources are the latest checkpoint, events by
// index, the caller's history, a session's files at its latest turn, the
// policies that bind the caller, and agents' file trees (vfs.go, with the
// vfs_write tool). It is a client of annald's HTTP API acting with one
// credential, so it can do exactly what that credential may: `annal mcp` runs it over stdio for agent hosts that spawn servers,
// annald serves it at /mcp over streamable HTTP for the bearer of each
// request. A refusal is a tool error (isError) naming the stage, gate and
// reason, and where the denial was logged, so that a model can adapt.
package agentmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// instructions tell a model what the server is for.
const instructions = `Annal is the kernel that decides and records your actions. Before you act on
anything (read, create, change or run), call submit with what you are about to do: the kernel checks
your grants, budget, ring, rate limit and policies, and logs the action in a verifiable log. Only act if
submit answers "committed". If it answers "held", a human must approve first: call wait_hold. If it is
denied, the answer says which rule refused and why; do not retry the same action unchanged.`

// Limits on what a tool waits for.
const (
	defaultHoldWait = 2 * time.Minute
	maxHoldWait     = time.Hour
	holdPoll        = 250 * time.Millisecond
)

// NewServer returns the kernel as an MCP server acting through c, which
// holds the agent's credential.
func NewServer(c *client.Client, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "annal", Title: "Annal kernel", Version: version},
		&mcp.ServerOptions{Instructions: instructions})
	k := &kernelTools{c: c}
	closed := false
	mcp.AddTool(s, &mcp.Tool{
		Name:  "submit",
		Title: "Submit an action to the kernel",
		Description: "Ask the kernel to allow and record one action before you perform it. type is observe (read), " +
			"create, mutate (change) or execute (run); target is what it acts on, a '/'-separated path such as " +
			"workspace/notes.md. Answers the receipt (status committed, the log index, the energy it cost), or " +
			"status held with a hold_id when a human must approve (then call wait_hold). A refusal is an error " +
			"naming the rule that refused. To run something (execute), submit its intent first — payload " +
			"{\"phase\":\"intent\",\"input_oid\":\"sha256:<hex of what you will run>\"} — run it only once committed (or " +
			"approved), then submit the result: payload {\"intent\": <the intent's index>, \"input_oid\", \"output_oid\", " +
			"\"artifact_hash\", \"exit_code\", \"output_bytes\"} on the same target.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &closed, OpenWorldHint: &closed},
	}, k.submit)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "wait_hold",
		Title:       "Wait for a human's answer to a held action",
		Description: "Wait until a human approves or rejects a held action (or it times out). Answers approved (the action is now logged and you may perform it), rejected or timed_out.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &closed},
	}, k.waitHold)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "proof",
		Title:       "Proof that an event is in the log",
		Description: "The c2sp.org/tlog-proof of the event at a log index against the latest signed checkpoint, which anyone can check offline (annal-verify proof). With wait, waits until a checkpoint covers it.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closed},
	}, k.proof)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "budget",
		Title:       "What you may still spend",
		Description: "Your energy balance, your envelopes (budget, what is left, what they allow, what waits for a human), your ring and how many requests your rate limit allows now.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closed},
	}, k.budget)
	mcp.AddTool(s, &mcp.Tool{
		Name:  "record_turn",
		Title: "Record a session turn's file changes",
		Description: "Record the files one turn of a session changed, as a delta in the session's hash chain " +
			"(create, modify or delete a path, with the new content's sha256). The chain lets a human roll the " +
			"session back to any turn.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &closed, OpenWorldHint: &closed},
	}, k.recordTurn)

	s.AddResource(&mcp.Resource{URI: "annal://checkpoint", Name: "checkpoint", Title: "Latest signed checkpoint",
		Description: "The log's latest signed checkpoint (c2sp.org/tlog-checkpoint): origin, size, root hash, signatures.",
		MIMEType:    "text/plain"}, k.readCheckpoint)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "annal://events/{index}", Name: "event", Title: "An event by log index",
		Description: "The event at a log index, exactly as logged (canonical JSON).", MIMEType: "application/json"}, k.readEvent)
	s.AddResource(&mcp.Resource{URI: "annal://history", Name: "history", Title: "Your history",
		Description: "Your newest 50 events (and those of the agents you created), newest first, each with its index and leaf hash.",
		MIMEType:    "application/json"}, k.readHistory)
	s.AddResource(&mcp.Resource{URI: "annal://policies", Name: "policies", Title: "Policies that bind you",
		Description: "The policies attached to you or to your envelopes' chains; an action that breaks one is refused.",
		MIMEType:    "application/json"}, k.readPolicies)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "vfs://sessions/{session}/{+path}", Name: "session files",
		Title:       "A session's files at its latest turn",
		Description: "vfs://sessions/<id>/ lists the session's files (path and content hash) after its latest recorded turn, from the delta chain; vfs://sessions/<id>/<path> is one file's content hash. Read-only.",
		MIMEType:    "application/json"}, k.readSessionFiles)
	addVFS(s, k)
	return s
}

type kernelTools struct{ c *client.Client }

// SubmitInput is the submit tool's input.
type SubmitInput struct {
	Type        string `json:"type" jsonschema:"observe (read), create, mutate (change) or execute (run)"`
	Target      string `json:"target" jsonschema:"what the action is on: a '/'-separated path such as workspace/notes.md"`
	Payload     any    `json:"payload,omitempty" jsonschema:"details of the action as JSON (logged; its size counts toward the cost)"`
	PayloadHash string `json:"payload_hash,omitempty" jsonschema:"sha256:<64 hex> of a payload kept outside the log, instead of payload"`
	Envelope    string `json:"envelope,omitempty" jsonschema:"the envelope to act under; by default your oldest envelope that allows the action"`
	Session     string `json:"session,omitempty" jsonschema:"the session the action belongs to, if any"`
	WaitProof   bool   `json:"wait_proof,omitempty" jsonschema:"also wait until a signed checkpoint covers the action and return its proof"`
}

func (k *kernelTools) submit(ctx context.Context, _ *mcp.CallToolRequest, in SubmitInput) (*mcp.CallToolResult, any, error) {
	req := api.ActionRequest{Type: in.Type, Target: in.Target, PayloadHash: in.PayloadHash, Envelope: in.Envelope, Session: in.Session}
	if in.Payload != nil {
		raw, err := json.Marshal(in.Payload)
		if err != nil {
			return refusal(fmt.Errorf("payload: %w", err)), nil, nil
		}
		req.Payload = raw
	}
	rc, err := k.c.Submit(ctx, req)
	if err != nil {
		return refusal(err), nil, nil
	}
	var text string
	switch rc.Status {
	case "held":
		text = fmt.Sprintf("held: a human must approve %s on %s first (hold %s). Call wait_hold with this hold_id; do not perform the action until it is approved.",
			rc.Type, rc.Target, rc.HoldID)
	default:
		text = fmt.Sprintf("committed: %s on %s is logged at index %d (cost %d). You may perform it.", rc.Type, rc.Target, rc.Index, rc.Cost)
		if in.WaitProof {
			p, err := k.c.WaitProof(ctx, rc.Index)
			if err != nil {
				rc.ProofError = err.Error()
			} else {
				rc.Proof = string(p)
				text += " The proof is in the receipt."
			}
		}
	}
	return result(text, rc), nil, nil
}

// WaitHoldInput is the wait_hold tool's input.
type WaitHoldInput struct {
	HoldID         string `json:"hold_id" jsonschema:"the hold_id submit answered"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for the answer, at most 3600 (default 120)"`
}

// HoldOutcome is what wait_hold answers.
type HoldOutcome struct {
	HoldID     string `json:"hold_id"`
	Status     string `json:"status"`
	AnsweredBy string `json:"answered_by,omitempty"`
	// Index is where the answer was logged (for an approval, the action).
	Index  uint64 `json:"index,omitempty"`
	Type   string `json:"type"`
	Target string `json:"target"`
	// Reason is what the answer logged with it: the human's reason, or why
	// an approval was refused on re-check or the hold timed out.
	Reason string `json:"reason,omitempty"`
}

func (k *kernelTools) waitHold(ctx context.Context, _ *mcp.CallToolRequest, in WaitHoldInput) (*mcp.CallToolResult, any, error) {
	wait := defaultHoldWait
	if in.TimeoutSeconds > 0 {
		wait = min(time.Duration(in.TimeoutSeconds)*time.Second, maxHoldWait)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	h, err := k.c.WaitHold(ctx, in.HoldID, holdPoll)
	switch {
	case err != nil && h != nil:
		return refusal(fmt.Errorf("hold %s is still waiting for a human after %v; call wait_hold again to keep waiting", in.HoldID, wait)), nil, nil
	case err != nil:
		return refusal(err), nil, nil
	}
	out := HoldOutcome{HoldID: h.ID, Status: h.Status, AnsweredBy: h.AnsweredBy, Index: h.AnsweredAt, Type: h.Type, Target: h.Target, Reason: h.Reason}
	text := fmt.Sprintf("%s: %s on %s", h.Status, h.Type, h.Target)
	why := ""
	if h.Reason != "" {
		why = fmt.Sprintf(" (reason: %s)", h.Reason)
	}
	if h.Status == "approved" {
		text += fmt.Sprintf(" was approved by %s%s and is now logged at index %d. You may perform it.", h.AnsweredBy, why, h.AnsweredAt)
	} else {
		text += fmt.Sprintf(" ended at log index %d%s. Do not perform it.", h.AnsweredAt, why)
	}
	return result(text, out), nil, nil
}

// ProofInput is the proof tool's input.
type ProofInput struct {
	Index uint64 `json:"index" jsonschema:"the log index of the event (the receipt's index)"`
	Wait  bool   `json:"wait,omitempty" jsonschema:"wait until a signed checkpoint covers the event"`
}

func (k *kernelTools) proof(ctx context.Context, _ *mcp.CallToolRequest, in ProofInput) (*mcp.CallToolResult, any, error) {
	var p []byte
	var err error
	if in.Wait {
		p, err = k.c.WaitProof(ctx, in.Index)
	} else {
		p, err = k.c.Proof(ctx, in.Index)
	}
	if err != nil {
		return refusal(err), nil, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(p)}},
		StructuredContent: map[string]any{"index": in.Index, "tlog_proof": string(p)}}, nil, nil
}

// Budget is what the budget tool answers.
type Budget struct {
	Actor     string          `json:"actor"`
	Balance   uint64          `json:"balance"`
	Reserved  uint64          `json:"reserved"`
	Envelopes []EnvelopeLeft  `json:"envelopes"`
	Ring      json.RawMessage `json:"ring,omitempty"`
}

// EnvelopeLeft is one of the caller's envelopes.
type EnvelopeLeft struct {
	ID        string      `json:"id"`
	Budget    uint64      `json:"budget"`
	Remaining uint64      `json:"remaining"`
	Grants    []api.Grant `json:"grants"`
	HoldOn    []api.Grant `json:"hold_on,omitempty"`
	Expires   string      `json:"expires,omitempty"`
	Revoked   bool        `json:"revoked,omitempty"`
	Parent    string      `json:"parent,omitempty"`
}

func (k *kernelTools) budget(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	me, err := k.c.WhoAmI(ctx)
	if err != nil {
		return refusal(err), nil, nil
	}
	envs, err := k.c.Envelopes(ctx)
	if err != nil {
		return refusal(err), nil, nil
	}
	out := Budget{Actor: me.ID, Balance: me.Balance, Reserved: me.Reserved, Envelopes: []EnvelopeLeft{}}
	for _, v := range envs {
		if v.Holder != me.ID {
			continue
		}
		out.Envelopes = append(out.Envelopes, EnvelopeLeft{ID: v.ID, Budget: v.Budget, Remaining: v.Budget - v.Consumed - v.Reserved,
			Grants: v.Grants, HoldOn: v.HoldOn, Expires: v.Expires, Revoked: v.Revoked, Parent: v.Parent})
	}
	if rings, err := k.c.Rings(ctx); err == nil {
		var views []json.RawMessage
		if json.Unmarshal(rings, &views) == nil {
			for _, v := range views {
				var id struct {
					Agent string `json:"agent"`
				}
				if json.Unmarshal(v, &id) == nil && id.Agent == me.ID {
					out.Ring = v
				}
			}
		}
	}
	text := fmt.Sprintf("balance %d energy (%d reserved); %d envelope(s)", me.Balance, me.Reserved, len(out.Envelopes))
	for _, v := range out.Envelopes {
		if !v.Revoked {
			text += fmt.Sprintf("; %s: %d of %d left", v.ID, v.Remaining, v.Budget)
		}
	}
	return result(text, out), nil, nil
}

// RecordTurnInput is the record_turn tool's input.
type RecordTurnInput struct {
	Session string       `json:"session" jsonschema:"the session id"`
	TurnID  string       `json:"turn_id" jsonschema:"this turn's id, unique in the session"`
	Changes []api.Change `json:"changes" jsonschema:"the files the turn changed"`
}

func (k *kernelTools) recordTurn(ctx context.Context, _ *mcp.CallToolRequest, in RecordTurnInput) (*mcp.CallToolResult, any, error) {
	out, err := k.c.AppendDelta(ctx, in.Session, api.DeltaRequest{TurnID: in.TurnID, Changes: in.Changes})
	if err != nil {
		return refusal(err), nil, nil
	}
	return result(fmt.Sprintf("turn %s of session %s is logged at index %d", in.TurnID, in.Session, out.Receipt.Index), out), nil, nil
}

// result is a tool's answer: text for the model and the same as
// structured content.
func result(text string, v any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: v}
}

// Refusal is the structured content of a tool error: what refused and why.
type Refusal struct {
	Error       string  `json:"error"`
	Status      int     `json:"status,omitempty"`
	Stage       string  `json:"stage,omitempty"`
	Gate        string  `json:"gate,omitempty"`
	Reason      string  `json:"reason,omitempty"`
	DenialIndex *uint64 `json:"denial_index,omitempty"`
	// Retry says whether sending the same request later may succeed (a
	// rate limit, a busy kernel).
	Retry bool `json:"retry"`
}

// refusal turns a kernel error into a tool error a model can act on.
func refusal(err error) *mcp.CallToolResult {
	r := Refusal{Error: err.Error()}
	var e *client.Error
	text := "refused: " + err.Error()
	if errors.As(err, &e) {
		r.Status, r.Stage, r.Gate, r.Reason, r.DenialIndex = e.Status, e.Stage, e.Gate, e.Reason, e.DenialIndex
		r.Error = e.Message
		r.Retry = e.Status == 429 || (e.Status == 503 && !e.OutcomeUnknown)
		var parts []string
		if e.Stage != "" {
			parts = append(parts, "stage "+e.Stage)
		}
		if e.Gate != "" {
			parts = append(parts, "gate "+e.Gate)
		}
		text = "denied"
		if len(parts) > 0 {
			text += " (" + strings.Join(parts, ", ") + ")"
		}
		text += ": " + e.Message
		if e.DenialIndex != nil {
			text += fmt.Sprintf(" [the refusal is logged at index %d]", *e.DenialIndex)
		}
		if r.Retry {
			text += " You may retry later."
		} else if e.Status == 403 {
			text += " Do not retry this action unchanged."
		}
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: r}
}

// ---- resources --------------------------------------------------------

func textResource(uri, mime string, data []byte) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: string(data)}}}
}

// readError maps a kernel error to a resource error: not found, or the
// kernel's message.
func readError(uri string, err error) error {
	if client.IsStatus(err, 404) {
		return mcp.ResourceNotFoundError(uri)
	}
	return fmt.Errorf("%s: %w", uri, err)
}

func (k *kernelTools) readCheckpoint(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	cp, err := k.c.Checkpoint(ctx)
	if err != nil {
		return nil, readError(req.Params.URI, err)
	}
	return textResource(req.Params.URI, "text/plain", cp), nil
}

func (k *kernelTools) readEvent(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	rest, ok := strings.CutPrefix(req.Params.URI, "annal://events/")
	index, err := strconv.ParseUint(rest, 10, 64)
	if !ok || err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	ev, err := k.c.Event(ctx, index)
	if err != nil {
		return nil, readError(req.Params.URI, err)
	}
	return textResource(req.Params.URI, "application/json", ev), nil
}

func (k *kernelTools) readHistory(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	page, err := k.c.History(ctx, url.Values{"limit": {"50"}})
	if err != nil {
		return nil, readError(req.Params.URI, err)
	}
	raw, err := json.MarshalIndent(page, "", "  ")
	if err != nil {
		return nil, err
	}
	return textResource(req.Params.URI, "application/json", raw), nil
}

func (k *kernelTools) readPolicies(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	raw, err := k.c.BindingPolicies(ctx)
	if err != nil {
		return nil, readError(req.Params.URI, err)
	}
	return textResource(req.Params.URI, "application/json", raw), nil
}

// SessionFile is one file of a session's tree.
type SessionFile struct {
	Path        string `json:"path"`
	ContentHash string `json:"content_hash"`
}

func (k *kernelTools) readSessionFiles(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rest, ok := strings.CutPrefix(uri, "vfs://sessions/")
	session, path, _ := strings.Cut(rest, "/")
	if !ok || session == "" {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	raw, err := k.c.Session(ctx, session)
	if err != nil {
		return nil, readError(uri, err)
	}
	var s struct {
		Files map[string]string `json:"files"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", uri, err)
	}
	if path == "" {
		files := []SessionFile{}
		for p, h := range s.Files {
			files = append(files, SessionFile{Path: p, ContentHash: h})
		}
		slices.SortFunc(files, func(a, b SessionFile) int { return strings.Compare(a.Path, b.Path) })
		out, err := json.MarshalIndent(files, "", "  ")
		if err != nil {
			return nil, err
		}
		return textResource(uri, "application/json", out), nil
	}
	h, ok := s.Files[path]
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	out, err := json.Marshal(SessionFile{Path: path, ContentHash: h})
	if err != nil {
		return nil, err
	}
	return textResource(uri, "application/json", out), nil
}
