package kernel

import (
	"context"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/policy"
)

// SetPolicy defines a named policy, or changes it: each change is a new
// version in the log (policy.set), and agents bound to it are checked
// against the latest version from the next action on. Any active human may
// define policies; what binds an agent is the attachment.
func (k *Kernel) SetPolicy(ctx context.Context, by *Actor, p policy.Policy) (*Receipt, error) {
	const stage = "policy"
	if err := p.Validate(); err != nil {
		return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	if _, err := policy.Compile(p); err != nil {
		return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	return k.decideControl(ctx, stage, func(l *ledger.Ledger, _ event.Instant) (*event.Event, error) {
		var version uint64 = 1
		if old, ok := l.Policies[p.Name]; ok {
			version = old.Version + 1
		}
		return &event.Event{Kind: event.KindPolicySet, Actor: by.ID, Policy: &event.PolicyRecord{Policy: p, Version: version}}, nil
	})
}

// PolicyAttachment binds a policy to an agent or to an envelope (and so to
// every envelope delegated from it).
type PolicyAttachment = event.PolicyAttachment

// AttachPolicy attaches (or, with Detach, detaches) a policy. A human who
// oversees the agent may bind it; an envelope is bound by root or its
// issuer.
func (k *Kernel) AttachPolicy(ctx context.Context, by *Actor, at PolicyAttachment) (*Receipt, error) {
	const stage = "policy"
	if err := policy.ValidName(at.Policy); err != nil {
		return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	if (at.Agent == "") == (at.Envelope == "") {
		return nil, denyAt(stage, GateForm, ErrInvalid, "name exactly one agent or one envelope")
	}
	return k.decideControl(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindPolicyAttached, Actor: by.ID, PolicyAttachment: &at}, nil
	})
}

// Policies lists the defined policies, latest versions.
func (k *Kernel) Policies() []ledger.Policy {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []ledger.Policy{}
	for _, p := range k.ledger.Policies {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b ledger.Policy) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// PoliciesBinding returns the policies that bind actor's actions: those
// attached to it and to every envelope of the chains of the envelopes it
// holds (checkPolicy's set), each once, by name. A name attached but not
// defined is left out (such an action is refused, fail closed).
func (k *Kernel) PoliciesBinding(actor *Actor) []ledger.Policy {
	k.mu.Lock()
	defer k.mu.Unlock()
	names := map[string]bool{}
	if a, ok := k.ledger.Actors[actor.ID]; ok {
		for _, n := range a.Policies {
			names[n] = true
		}
	}
	for _, id := range k.ledger.EnvelopesOf(actor.ID) {
		chain, v := k.ledger.Chain(id)
		if v != nil {
			continue
		}
		for _, e := range chain {
			for _, n := range e.Policies {
				names[n] = true
			}
		}
	}
	out := []ledger.Policy{}
	for n := range names {
		if p, ok := k.ledger.Policies[n]; ok {
			out = append(out, *p)
		}
	}
	slices.SortFunc(out, func(a, b ledger.Policy) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// MayEver reports whether actor could ever be allowed t on target: its
// writable targets and its own policies' blocked actions allow it, whatever
// its envelopes, energy and ring are now. It is what a tool list shows (an
// MCP gate hides the tools no envelope could ever allow); every action is
// still decided by all its gates.
//
// With observeNeedsGrant an observe needs a grant too (what a gate in front
// of a tool server asks: a read-only tool still reads something).
func (k *Kernel) MayEver(actor *Actor, t event.ActionType, target string, observeNeedsGrant bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v := k.ledger.MayEver(actor.ID, t, target, observeNeedsGrant); v != nil {
		return denyAt(v.Stage, v.Gate, classOf(v.Class), "%s", v.Reason)
	}
	return nil
}
