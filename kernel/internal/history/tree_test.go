package history

import (
	"slices"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/policy"
)

// TestSpec002_VFS_TheIndexNamesEachTreesEvents: the events an agent's
// file tree is folded from — actions on its vfs/ targets (whoever acts),
// signals to it, policies attached to it — carry its tree's index term,
// and nothing else does; a policy's definitions carry its name's.
func TestSpec002_VFS_TheIndexNamesEachTreesEvents(t *testing.T) {
	action := func(actor, target string) *event.Event {
		return &event.Event{Kind: event.KindAction, Actor: actor, Action: &event.Action{Type: event.Mutate, Target: target}}
	}
	for _, c := range []struct {
		name string
		ev   *event.Event
		tree string
	}{
		{"own write", action("agent-a", "vfs/agent-a/mem/working/x"), "agent-a"},
		{"a message to b", action("agent-a", "vfs/agent-b/ipc/inbox/m"), "agent-b"},
		{"a target outside the tree", action("agent-a", "vfs/agent-a/tmp/x"), ""},
		{"workspace", action("agent-a", "workspace/vfs/agent-a/mem/working/x"), ""},
		{"a resume", &event.Event{Kind: event.KindSignalSent, Actor: "root", Signal: &event.SignalRecord{Agent: "agent-a", Signal: "SIGCONT", Effect: event.EffectContinue}}, "agent-a"},
		{"an attachment", &event.Event{Kind: event.KindPolicyAttached, Actor: "root", PolicyAttachment: &event.PolicyAttachment{Policy: "quiet", Agent: "agent-a"}}, "agent-a"},
		{"an envelope's attachment", &event.Event{Kind: event.KindPolicyAttached, Actor: "root", PolicyAttachment: &event.PolicyAttachment{Policy: "quiet", Envelope: "env-1"}}, ""},
	} {
		terms := IndexTerms(c.ev)
		has := slices.ContainsFunc(terms, func(x []byte) bool { return x[0] == termTree })
		if has != (c.tree != "") || c.tree != "" && !slices.ContainsFunc(terms, func(x []byte) bool { return string(x) == "v"+c.tree }) {
			t.Errorf("%s: terms %q, want the tree of %q", c.name, terms, c.tree)
		}
		if q := (Query{Tree: c.tree}); c.tree != "" && !q.Matches(c.ev, nil) {
			t.Errorf("%s: Query{Tree: %s} does not match it", c.name, c.tree)
		}
	}
	set := &event.Event{Kind: event.KindPolicySet, Actor: "root", Policy: &event.PolicyRecord{Policy: policy.Policy{Name: "quiet"}, Version: 2}}
	if !slices.ContainsFunc(IndexTerms(set), func(x []byte) bool { return string(x) == "pquiet" }) || !(Query{Policy: "quiet"}).Matches(set, nil) || (Query{Policy: "loud"}).Matches(set, nil) {
		t.Errorf("policy.set terms %q", IndexTerms(set))
	}
}
