package ledger

import (
	"fmt"

	"github.com/annal-dev/annal/format/vfspath"
	"github.com/annal-dev/annal/kernel/event"
)

// The agent file system (RulesVFS, seed 002 "Virtual File System"). A
// write to an agent's tree is an action like any other — create or mutate
// on the target "vfs/{agent}/{path}", its content named by payload_hash
// (the OID of the bytes the blob store keeps) — and passes every gate of
// an action. What RulesVFS adds is checked here, before the action's
// gates, and in the boundary and envelope gates:
//
//   - every target under vfs/ is a path of some agent's tree
//     (format/vfspath), and a write names a file of a writable directory:
//     policy/, audit/ and ipc/outbox/ are views of the log, never written;
//   - a write carries its content as payload_hash, never inline;
//   - an agent may write its own tree without a grant, under any envelope
//     it holds; writing another's (a message to its ipc/inbox) needs a
//     grant like any target.
//
// Observe actions on the tree are recorded claims like any other. The
// tree itself is a fold of these actions, kept by the kernel's read side
// (kernel/vfs.go), never in the ledger.

// RulesVFS adds the agent file system.
const RulesVFS = 6

func vfsRefuse(gate string, class Class, format string, args ...any) *Violation {
	return (&Violation{Class: class, Reason: fmt.Sprintf(format, args...), since: RulesVFS}).at(gate)
}

// checkVFS is run on every event before its kind's gates.
func checkVFS(c *checker) *Violation {
	ev := c.ev
	a := ev.Action
	if a == nil || (ev.Kind != event.KindAction && ev.Kind != event.KindHoldRequested) {
		return nil
	}
	p, ok, err := vfspath.ParseTarget(a.Target)
	switch {
	case !ok:
		return nil
	case err != nil:
		return vfsRefuse(GateForm, Invalid, "target %s: %v", a.Target, err)
	case a.Type == event.Observe:
		return nil
	case a.Type == event.Execute:
		return vfsRefuse(GateForm, Invalid, "%s is a file of the agent file system: it is written (create or mutate), never executed", p.URI())
	}
	if err := p.Writable(); err != nil {
		return vfsRefuse(GateBoundary, Forbidden, "%v", err)
	}
	if a.PayloadHash == "" {
		return vfsRefuse(GateForm, Invalid, "a write to %s names its content by payload_hash (the OID of the bytes the blob store keeps), not inline", p.URI())
	}
	return nil
}

// OwnTree reports whether target is a file of agent's own tree that agent
// may write without a grant (under RulesVFS).
func (l *Ledger) OwnTree(agent, target string) bool {
	if l.Rules < RulesVFS {
		return false
	}
	p, ok, err := vfspath.ParseTarget(target)
	return ok && err == nil && p.Agent == agent && p.Writable() == nil
}
