package kernel

import (
	"context"
	"slices"
	"strings"
	"time"

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
	return k.control(ctx, stage, []string{"policy/" + p.Name}, func(time.Time) (*event.Event, error) {
		b, err := k.liveActor(stage, by.ID)
		if err != nil {
			return nil, err
		}
		if !b.IsHuman() {
			return nil, denyAt(stage, GateAuthority, ErrForbidden, "%s is an agent: only humans define policies", b.ID)
		}
		var version uint64 = 1
		if old, ok := k.ledger.Policies[p.Name]; ok {
			version = old.Version + 1
		}
		return &event.Event{Kind: event.KindPolicySet, Actor: b.ID, Policy: &event.PolicyRecord{Policy: p, Version: version}}, nil
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
	key := "actor/" + at.Agent
	if at.Envelope != "" {
		key = "envelope/" + at.Envelope
	}
	return k.control(ctx, stage, []string{key}, func(time.Time) (*event.Event, error) {
		b, err := k.liveActor(stage, by.ID)
		if err != nil {
			return nil, err
		}
		var attached []string
		if at.Agent != "" {
			a, err := k.oversee(stage, b, at.Agent)
			if err != nil {
				return nil, err
			}
			attached = a.Policies
		} else {
			v, ok := k.ledger.Envelopes[at.Envelope]
			switch {
			case !ok:
				return nil, denyAt(stage, GateEnvelope, ErrNotFound, "envelope %s does not exist", at.Envelope)
			case !b.IsHuman() || (b.ID != RootID && v.Issuer != b.ID):
				return nil, denyAt(stage, GateAuthority, ErrForbidden, "only root or envelope %s's issuer binds policies to it", v.ID)
			}
			attached = v.Policies
		}
		if _, ok := k.ledger.Policies[at.Policy]; !ok && !at.Detach {
			return nil, denyAt(stage, GatePolicy, ErrNotFound, "policy %s is not defined", at.Policy)
		}
		if slices.Contains(attached, at.Policy) != at.Detach {
			return nil, denyAt(stage, GatePolicy, ErrConflict, "policy %s is %s", at.Policy, map[bool]string{true: "not attached", false: "already attached"}[at.Detach])
		}
		return &event.Event{Kind: event.KindPolicyAttached, Actor: b.ID, PolicyAttachment: &at}, nil
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
