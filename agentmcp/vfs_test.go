package agentmcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/format/oid"
)

// TestSpec002_VFS_MCPResources: through the MCP path an agent host uses,
// the agent writes its memory with vfs_write, reads it back as the
// resource vfs://<agent>/..., lists a directory, reads its audit view,
// and is refused a write to a read-only view; vfs://sessions/ still names
// sessions' files.
func TestSpec002_VFS_MCPResources(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(t)
	ctx := context.Background()
	uri := "vfs://" + w.agentID + "/mem/episodic/day-1.md"
	var out api.VFSWritten
	res := call(t, cs, "vfs_write", VFSWriteInput{URI: uri, Content: "met the reviewer\n"}, &out)
	if res.IsError || out.OID != oid.Of([]byte("met the reviewer\n")) || !strings.Contains(text(res), "logged at index") {
		t.Fatalf("vfs_write: %s %+v", text(res), out)
	}
	ev, err := w.root.Event(ctx, out.Receipt.Index)
	if err != nil || !strings.Contains(string(ev), `"payload_hash":"`+out.OID+`"`) {
		t.Fatalf("the logged write: %s %v", ev, err)
	}
	if got := readResource(t, cs, uri); got != "met the reviewer\n" {
		t.Errorf("the resource: %q", got)
	}
	var listing api.VFSListing
	if err := json.Unmarshal([]byte(readResource(t, cs, "vfs://"+w.agentID+"/mem/")), &listing); err != nil || len(listing.Files) != 1 ||
		listing.Files[0].Path != "mem/episodic/day-1.md" || listing.Files[0].Index != out.Receipt.Index {
		t.Errorf("the listing: %+v %v", listing, err)
	}
	if got := readResource(t, cs, "vfs://"+w.agentID+"/audit/events.jsonl"); !strings.Contains(got, `"index":`+itoa(out.Receipt.Index)) {
		t.Errorf("audit/events.jsonl lacks the write: %s", got)
	}
	res = call(t, cs, "vfs_write", VFSWriteInput{URI: "vfs://" + w.agentID + "/policy/active.json", Content: "[]"}, nil)
	if !res.IsError || !strings.Contains(text(res), "read-only") {
		t.Errorf("a write to policy/: %s", text(res))
	}
	res = call(t, cs, "vfs_write", VFSWriteInput{URI: "vfs://" + w.agentID + "/mem/../policy/x", Content: "x"}, nil)
	if !res.IsError || !strings.Contains(text(res), `".." segment`) && !strings.Contains(text(res), "not in one of the tree's directories") {
		t.Errorf("a path with ..: %s", text(res))
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "vfs://root/mem/"}); err == nil {
		t.Errorf("the agent read root's tree")
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "vfs://sessions/nope/"}); err == nil || strings.Contains(err.Error(), "not an actor") {
		t.Errorf("vfs://sessions/ is a session's files: %v", err)
	}
}
