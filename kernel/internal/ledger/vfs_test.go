package ledger

import (
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// TestSpec002_VFS_TheFoldJudgesWritesToTheTree: under RulesVFS an agent
// writes its own tree without a grant, and the fold refuses what the
// kernel refuses — a write to a read-only view, a target under vfs/ that
// is no path of a tree, content not named by payload_hash, an execute, and
// another agent's tree without a grant — whoever wrote the entry.
func TestSpec002_VFS_TheFoldJudgesWritesToTheTree(t *testing.T) {
	h := "sha256:" + strings.Repeat("b", 64)
	write := func(b *builder, typ event.ActionType, target, hash string) *event.Event {
		return b.act("agent-a", "env-a", event.Action{Type: typ, Target: target, PayloadHash: hash}, map[event.ActionType]uint64{event.Create: 10, event.Mutate: 15}[typ])
	}
	b := newBuilder(t)
	l := fold(t, append(governed(b), b.agent(RootID, "agent-b", 10))...)
	foldOn(t, l, write(b, event.Mutate, "vfs/agent-a/mem/working/notes", h), write(b, event.Create, "vfs/agent-a/ipc/inbox/self", h))
	if l.Actors["agent-a"].Consumed != 25 {
		t.Fatalf("own-tree writes settled %d, want 25", l.Actors["agent-a"].Consumed)
	}
	for _, tc := range []struct {
		name string
		ev   *event.Event
		gate string
		want string
	}{
		{"a view of the log", write(b, event.Mutate, "vfs/agent-a/policy/active.json", h), GateBoundary, "view of the log"},
		{"the audit view", write(b, event.Create, "vfs/agent-a/audit/events.jsonl", h), GateBoundary, "view of the log"},
		{"the outbox", write(b, event.Mutate, "vfs/agent-a/ipc/outbox/agent-b/m", h), GateBoundary, "read-only"},
		{"a directory", write(b, event.Mutate, "vfs/agent-a/mem/working", h), GateBoundary, "is a directory"},
		{"no path of a tree", write(b, event.Mutate, "vfs/agent-a/tmp/x", h), GateForm, "not in one of the tree's directories"},
		{"the sessions' name", write(b, event.Mutate, "vfs/sessions/mem/working/x", h), GateForm, "files of sessions"},
		{"content inline", write(b, event.Mutate, "vfs/agent-a/mem/working/y", ""), GateForm, "payload_hash"},
		{"an execute", b.act("agent-a", "env-a", event.Action{Type: event.Execute, Target: "vfs/agent-a/mem/working/y"}, 25), GateForm, "never executed"},
		{"another agent's inbox without a grant", write(b, event.Create, "vfs/agent-b/ipc/inbox/m", h), GateBoundary, "outside agent-a's writable targets"},
		{"another agent's memory", write(b, event.Mutate, "vfs/agent-b/mem/semantic/x", h), GateBoundary, "outside agent-a's writable targets"},
	} {
		t.Run(tc.name, func(t *testing.T) { mustRefuse(t, l, tc.ev, tc.gate, tc.want) })
	}
	// Observing a file of a tree is a recorded claim like any other.
	foldOn(t, l, b.act("agent-a", "", event.Action{Type: event.Observe, Target: "vfs/agent-b/ipc/inbox/m"}, 0))
}

// TestSpec002_VFS_AGrantOpensAnotherAgentsInbox: a message to another
// agent's inbox folds once the writer's grants and envelope cover it.
func TestSpec002_VFS_AGrantOpensAnotherAgentsInbox(t *testing.T) {
	b := newBuilder(t)
	inbox := event.Grant{Pattern: "vfs/*/ipc/inbox/*", Actions: []event.ActionType{event.Create}}
	l := fold(t, b.genesis(1_000_000),
		b.actor(RootID, "agent-a", event.Agent, 1000, func(r *event.ActorRecord) { r.Grants = append(r.Grants, inbox) }),
		b.trust(RootID, "agent-a"), b.agent(RootID, "agent-b", 10),
		b.envelopeWith(RootID, "env-a", "agent-a", "", 500, func(e *event.Envelope) { e.Grants = append(e.Grants, inbox) }))
	foldOn(t, l, b.act("agent-a", "env-a", event.Action{Type: event.Create, Target: "vfs/agent-b/ipc/inbox/m", PayloadHash: "sha256:" + strings.Repeat("c", 64)}, 10))
	mustRefuse(t, l, b.act("agent-a", "env-a", event.Action{Type: event.Mutate, Target: "vfs/agent-b/ipc/inbox/m", PayloadHash: "sha256:" + strings.Repeat("c", 64)}, 15),
		GateBoundary, "outside agent-a's writable targets")
}
