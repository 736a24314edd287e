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

// IndexTerms gives one term per dimension an event has, in one buffer
// that a term's append cannot spill into the next (each term's capacity
// ends with it), in two allocations whatever their count.
func TestIndexTermsShareOneBuffer(t *testing.T) {
	ev := &event.Event{Kind: event.KindActionDenied, Actor: "agent-a", Session: "sess-1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		Action: &event.Action{Type: event.Mutate, Target: "vfs/agent-b/ipc/inbox/m", Envelope: "env-1"}}
	want := []string{"aagent-a", "ssess-1", "t4bf92f3577b34da6a3ce929d0e0e4736", "eenv-1", "odenied", "vagent-b"}
	terms := IndexTerms(ev)
	var got []string
	for _, term := range terms {
		got = append(got, string(term))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("terms %q, want %q", got, want)
	}
	_ = append(terms[0], 'x')
	if string(terms[1]) != "ssess-1" {
		t.Fatalf("an append to one term changed the next: %q", terms[1])
	}
	// Five terms, none of a file tree (whose parse of the target is the
	// tree's cost, not the terms').
	ev.Action.Target = "workspace/m"
	if n := testing.AllocsPerRun(100, func() { IndexTerms(ev) }); n > 2 {
		t.Errorf("IndexTerms made %v allocations for five terms, want 2", n)
	}
}
