package agentmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/annal-dev/annal/format/vfspath"
)

// The agent file system (seed 002, Virtual File System) as MCP: every
// path of an agent's tree is the resource vfs://{agent}/{path}, and the
// vfs_write tool writes a file. vfs://sessions/ stays the files of
// sessions (no agent has that name in the file system).

const vfsDescription = "Your file tree, kept by the kernel: vfs://<you>/mem/working/ (scratch, emptied when you are " +
	"resumed), mem/episodic/, mem/semantic/, state/checkpoints/, ipc/inbox/ (messages to you), ipc/outbox/<agent>/ " +
	"(messages you sent), and the read-only views policy/active.json, policy/history.json and audit/events.jsonl. " +
	"A directory reads as a JSON list of files (path, oid, the log index of the write, writer); a file as its content."

func addVFS(s *mcp.Server, k *kernelTools) {
	closed := false
	mcp.AddTool(s, &mcp.Tool{
		Name:  "vfs_write",
		Title: "Write a file of the agent file system",
		Description: "Write content to vfs://<agent>/<path>: your own tree's mem/working/, mem/episodic/, mem/semantic/, " +
			"state/checkpoints/ or ipc/inbox/, or another agent's vfs://<agent>/ipc/inbox/<name> to send it a message (that " +
			"needs a grant on vfs/<agent>/ipc/inbox/*). The write is an action the kernel checks and logs with the content's " +
			"sha256 OID; the answer is the receipt. policy/, audit/ and ipc/outbox/ are read-only.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &closed, OpenWorldHint: &closed},
	}, k.vfsWrite)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "vfs://{agent}/{+path}", Name: "agent files",
		Title: "An agent's file tree", Description: vfsDescription, MIMEType: "application/json"}, k.readVFS)
}

// VFSWriteInput is the vfs_write tool's input.
type VFSWriteInput struct {
	URI      string `json:"uri" jsonschema:"the file to write: vfs://<agent>/<directory>/<name>"`
	Content  string `json:"content" jsonschema:"the file's content, as text"`
	Envelope string `json:"envelope,omitempty" jsonschema:"the envelope to write under; by default your oldest envelope that allows it"`
}

func (k *kernelTools) vfsWrite(ctx context.Context, _ *mcp.CallToolRequest, in VFSWriteInput) (*mcp.CallToolResult, any, error) {
	out, err := k.c.VFSPut(ctx, in.URI, []byte(in.Content), in.Envelope)
	if err != nil {
		return refusal(err), nil, nil
	}
	text := fmt.Sprintf("written: %s is %s (%d bytes), logged at index %d.", out.URI, out.OID, out.Size, out.Receipt.Index)
	if out.Receipt.Status == "held" {
		text = fmt.Sprintf("held: a human must approve the write of %s first (hold %s); call wait_hold.", out.URI, out.Receipt.HoldID)
	}
	return result(text, out), nil, nil
}

func (k *kernelTools) readVFS(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	if strings.HasPrefix(uri, vfspath.Scheme+vfspath.Reserved+"/") {
		return k.readSessionFiles(ctx, req)
	}
	p, err := vfspath.ParseURI(uri)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", uri, err)
	}
	if p.IsDir() {
		l, err := k.c.VFSList(ctx, uri)
		if err != nil {
			return nil, readError(uri, err)
		}
		raw, err := json.MarshalIndent(l, "", "  ")
		if err != nil {
			return nil, err
		}
		return textResource(uri, "application/json", raw), nil
	}
	data, _, err := k.c.VFSRead(ctx, uri)
	if err != nil {
		return nil, readError(uri, err)
	}
	switch {
	case p.IsView():
		return textResource(uri, "application/json", data), nil
	case utf8.Valid(data):
		return textResource(uri, "text/plain", data), nil
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/octet-stream", Blob: data}}}, nil
}
