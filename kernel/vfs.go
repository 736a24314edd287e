package kernel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/annal-dev/annal/format/vfspath"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/history"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// The agent file system (seed 002, "Virtual File System"): every agent
// has a tree /agent/{id}/ (format/vfspath), served as vfs://{id}/... .
//
// A write is an action: create (a message to ipc/inbox/) or mutate
// (anything else) on the target vfs/{id}/{path}, its content named by
// payload_hash, the OID of the bytes the blob store keeps. It passes every
// gate of an action; RulesVFS (kernel/internal/ledger/vfs.go) lets an
// agent write its own tree without a grant and refuses writes to the
// read-only views. Writing another agent's tree — a message to its
// ipc/inbox — needs a grant such as vfs/{other}/ipc/inbox/*.
//
// What an agent sees is folded from the log on every read (VFSTree), never
// kept apart from it: the history index names the events of each tree
// (history.Query.Tree), so a rebuild of the state file gives the same tree.
//
//   - A file is its latest committed write.
//   - mem/working is ephemeral: a resume of the agent (SIGCONT after
//     SIGSTOP, the kernel's restart; a kill ends an agent for good) empties
//     its view. The writes stay in the log, for audit.
//   - ipc/inbox/{name} holds what anyone wrote there; the writer's
//     ipc/outbox/{receiver}/{name} shows the same write.
//   - policy/active.json, policy/history.json and audit/events.jsonl are
//     views of the log, built on read (VFSView).
//
// Who reads a tree: the agent itself, and the humans who oversee it (root
// and its creator). Other agents read none of it, not even a message they
// sent into it (their outbox shows what they sent).

// VFSFile is one file of a tree: where it is and the write that made it.
type VFSFile struct {
	Path   string        `json:"path"`
	OID    string        `json:"oid"`
	Index  uint64        `json:"index"`
	Writer string        `json:"writer"`
	Time   event.Instant `json:"time"`
}

// VFSPolicyChange is one change of the policies attached to an agent, as
// policy/history.json lists it: a policy attached to it or detached, or a
// new version of one (policy.set) while it is attached.
type VFSPolicyChange struct {
	Index  uint64        `json:"index"`
	Time   event.Instant `json:"time"`
	By     string        `json:"by"`
	Policy string        `json:"policy"`
	// Change is attached, detached or set (Version then is the new one).
	Change  string `json:"change"`
	Version uint64 `json:"version,omitempty"`
}

// VFSTree is an agent's tree folded from the log.
type VFSTree struct {
	Agent string
	// Files by path relative to the tree.
	Files map[string]VFSFile
	// Resumed is the index of the resume that last emptied mem/working
	// (0: none).
	Resumed uint64
	// Policies are the changes policy/history.json lists, in log order.
	Policies []VFSPolicyChange
}

// maxAuditEvents bounds audit/events.jsonl: the agent's newest events.
const maxAuditEvents = 5000

// VFSWrite records a write of the content named by oid to p, a writable
// file, by actor, under envelope (empty: the oldest that allows it).
func (k *Kernel) VFSWrite(ctx context.Context, actor *Actor, p vfspath.Path, oid, envelope string) (*Receipt, error) {
	if err := p.Writable(); err != nil {
		return nil, denyAt(StageValidate, ledger.GateBoundary, ErrForbidden, "%v", err)
	}
	return k.Submit(ctx, actor, ActionRequest{Type: event.ActionType(p.WriteType()), Target: p.Target(), PayloadHash: oid, Envelope: envelope})
}

// mayReadTree: viewer is the agent, root, or the agent's creator.
func (k *Kernel) mayReadTree(viewer *Actor, agent string) error {
	k.mu.Lock()
	a, ok := k.ledger.Actors[agent]
	k.mu.Unlock()
	switch {
	case !ok:
		return fmt.Errorf("%w: no actor %s", ErrNotFound, agent)
	case viewer.ID == agent || viewer.ID == RootID || a.Creator == viewer.ID && viewer.Kind == event.Human:
		return nil
	}
	return fmt.Errorf("%w: %s may not read vfs://%s/: a tree is read by its agent and the humans who oversee it", ErrForbidden, viewer.ID, agent)
}

// VFSTree folds agent's tree from the log, for viewer.
func (k *Kernel) VFSTree(ctx context.Context, viewer *Actor, agent string) (*VFSTree, error) {
	if err := k.mayReadTree(viewer, agent); err != nil {
		return nil, err
	}
	t := &VFSTree{Agent: agent, Files: map[string]VFSFile{}}
	if err := k.everyEvent(ctx, history.Query{Tree: agent}, t.fold); err != nil {
		return nil, err
	}
	sent := history.Query{Actor: agent, Kind: string(event.KindAction), TargetPrefix: vfspath.TargetRoot}
	return t, k.everyEvent(ctx, sent, t.foldSent)
}

// everyEvent calls f on every event q selects, oldest first, whoever
// its actor: the caller has decided who reads what.
func (k *Kernel) everyEvent(ctx context.Context, q history.Query, f func(history.Item)) error {
	q.Oldest, q.Limit = true, MaxHistoryPage
	for {
		page, err := k.findPage(ctx, q, nil)
		if err != nil {
			return err
		}
		for _, it := range page.Events {
			f(it)
		}
		if page.NextCursor == nil {
			return nil
		}
		q.Cursor = page.NextCursor
	}
}

// fold folds one event of the tree's own (history.Query.Tree).
func (t *VFSTree) fold(it history.Item) {
	ev := it.Event
	switch {
	case ev.Kind == event.KindAction && ev.Action.Type != event.Observe:
		p, _, err := vfspath.ParseTarget(ev.Action.Target)
		if err == nil && p.Writable() == nil && ev.Action.PayloadHash != "" {
			t.Files[p.Rel] = VFSFile{Path: p.Rel, OID: ev.Action.PayloadHash, Index: it.Index, Writer: ev.Actor, Time: ev.Time}
		}
	case ev.Kind == event.KindSignalSent && ev.Signal.Effect == event.EffectContinue:
		t.Resumed = it.Index
		for rel := range t.Files {
			if strings.HasPrefix(rel, vfspath.Working+"/") {
				delete(t.Files, rel)
			}
		}
	case ev.Kind == event.KindPolicyAttached:
		change := "attached"
		if ev.PolicyAttachment.Detach {
			change = "detached"
		}
		t.Policies = append(t.Policies, VFSPolicyChange{Index: it.Index, Time: ev.Time, By: ev.Actor, Policy: ev.PolicyAttachment.Policy, Change: change})
	}
}

// foldSent folds a write of the agent's into another agent's inbox into
// its own outbox.
func (t *VFSTree) foldSent(it history.Item) {
	a := it.Event.Action
	p, _, err := vfspath.ParseTarget(a.Target)
	if err != nil || p.Agent == t.Agent || p.Dir() != vfspath.Inbox || a.Type == event.Observe || a.PayloadHash == "" {
		return
	}
	rel := vfspath.Outbox + "/" + p.Agent + "/" + p.Name()
	t.Files[rel] = VFSFile{Path: rel, OID: a.PayloadHash, Index: it.Index, Writer: t.Agent, Time: it.Event.Time}
}

// List is the files of t at or under dir, by path.
func (t *VFSTree) List(dir string) []VFSFile {
	out := []VFSFile{}
	for rel, f := range t.Files {
		if (vfspath.Path{Rel: rel}).Under(dir) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b VFSFile) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// VFSView is the content of one of the read-only files of agent's tree,
// built from the log now: policy/active.json, policy/history.json or
// audit/events.jsonl.
func (k *Kernel) VFSView(ctx context.Context, viewer *Actor, p vfspath.Path) ([]byte, error) {
	if err := k.mayReadTree(viewer, p.Agent); err != nil {
		return nil, err
	}
	switch p.Rel {
	case vfspath.PolicyActive:
		return json.MarshalIndent(k.attachedPolicies(p.Agent), "", "  ")
	case vfspath.PolicyHistory:
		changes, err := k.policyHistory(ctx, p.Agent)
		if err != nil {
			return nil, err
		}
		return json.MarshalIndent(changes, "", "  ")
	case vfspath.AuditEvents:
		return k.auditLines(ctx, p.Agent)
	}
	return nil, fmt.Errorf("%w: %s is not a view of the log", ErrNotFound, p.URI())
}

// policyHistory is policy/history.json: every attachment of a policy to
// agent and every detachment, and every definition (policy.set) of a
// policy while it is attached to agent, in log order.
func (k *Kernel) policyHistory(ctx context.Context, agent string) ([]VFSPolicyChange, error) {
	t := &VFSTree{Agent: agent, Files: map[string]VFSFile{}}
	if err := k.everyEvent(ctx, history.Query{Tree: agent, Kind: string(event.KindPolicyAttached)}, t.fold); err != nil {
		return nil, err
	}
	all := slices.Clone(t.Policies)
	var names []string
	for _, c := range t.Policies {
		if !slices.Contains(names, c.Policy) {
			names = append(names, c.Policy)
		}
	}
	for _, name := range names {
		err := k.everyEvent(ctx, history.Query{Policy: name, Kind: string(event.KindPolicySet)}, func(it history.Item) {
			all = append(all, VFSPolicyChange{Index: it.Index, Time: it.Event.Time, By: it.Event.Actor, Policy: name, Change: "set", Version: it.Event.Policy.Version})
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(all, func(a, b VFSPolicyChange) int { return cmp.Compare(a.Index, b.Index) })
	out, attached := []VFSPolicyChange{}, map[string]bool{}
	for _, c := range all {
		switch c.Change {
		case "attached":
			attached[c.Policy] = true
		case "detached":
			delete(attached, c.Policy)
		case "set":
			if !attached[c.Policy] {
				continue
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// VFSActivePolicy is a policy attached to the agent now, as
// policy/active.json lists it (Defined false: attached but not defined,
// so the agent's actions are refused).
type VFSActivePolicy struct {
	Name    string          `json:"name"`
	Defined bool            `json:"defined"`
	Version uint64          `json:"version,omitempty"`
	SetAt   uint64          `json:"set_at,omitempty"`
	Policy  json.RawMessage `json:"policy,omitempty"`
}

func (k *Kernel) attachedPolicies(agent string) []VFSActivePolicy {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []VFSActivePolicy{}
	for _, name := range k.ledger.Actors[agent].Policies {
		ap := VFSActivePolicy{Name: name}
		if p, ok := k.ledger.Policies[name]; ok {
			raw, _ := json.Marshal(p.Policy)
			ap.Defined, ap.Version, ap.SetAt, ap.Policy = true, p.Version, p.SetAt, raw
		}
		out = append(out, ap)
	}
	slices.SortFunc(out, func(a, b VFSActivePolicy) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// auditLines is audit/events.jsonl: the agent's newest maxAuditEvents
// events, oldest first, one JSON object a line: the index, the leaf hash
// and the event exactly as logged.
func (k *Kernel) auditLines(ctx context.Context, agent string) ([]byte, error) {
	var items []history.Item
	q := history.Query{Actor: agent, Limit: MaxHistoryPage}
	for len(items) < maxAuditEvents {
		page, err := k.findPage(ctx, q, nil)
		if err != nil {
			return nil, err
		}
		items = append(items, page.Events...)
		if page.NextCursor == nil {
			break
		}
		q.Cursor = page.NextCursor
	}
	items = items[:min(len(items), maxAuditEvents)]
	slices.Reverse(items)
	var b bytes.Buffer
	for _, it := range items {
		fmt.Fprintf(&b, `{"index":%d,"leaf_hash":%q,"event":%s}`+"\n", it.Index, it.LeafHash, it.Entry)
	}
	return b.Bytes(), nil
}
