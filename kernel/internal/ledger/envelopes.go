package ledger

import (
	"github.com/annal-dev/annal/kernel/event"
)

// Envelope is an issued envelope and its spending.
type Envelope struct {
	event.Envelope
	IssuedAt uint64 `json:"issued_at"`
	Revoked  bool   `json:"revoked"`
	Consumed uint64 `json:"consumed"`
	Reserved uint64 `json:"reserved"`
	// Policies are attached to the envelope and bind whoever acts under
	// it or under an envelope delegated from it.
	Policies []string `json:"policies,omitempty"`

	// chain is Chain(ID), kept once the envelope is in the ledger (by the
	// rule that issues it, and by the load of a stored state: keepDerived): its
	// ancestors are fixed when it is issued and never leave the ledger, so
	// the walk up the chain is done once, not on every action.
	chain []*Envelope
	// chainClaims are the claims of an event under the envelope that
	// name its chain (claimSet.chain), kept with chain: they depend on
	// nothing else.
	chainClaims []Claim
	chainIDs    []string // the ids of chain
	// grants and holdOn are Grants and HoldOn compiled (compiledGrants);
	// key is the envelope's key in the stored state and in claims.
	grants, holdOn compiledGrants
	key            string
}

// stateKey is the envelope's key in the stored state and in claims.
func (v *Envelope) stateKey() string {
	if v.key != "" {
		return v.key
	}
	return envelopeKey(v.ID) // an envelope made outside the fold
}

// Allows reports whether the envelope's own grants allow t on target
// (Allows(v.Grants, target, t)), matched against their compiled form.
func (v *Envelope) Allows(t event.ActionType, target string) bool {
	return newGrantQuery(t, target).allowedByCompiled(v.grants, v.Grants)
}

// Remaining is budget − consumed − reserved.
func (v *Envelope) Remaining() uint64 { return v.Budget - v.Consumed - v.Reserved }

// EnvelopesOf returns the ids of the envelopes held by actor, oldest first.
func (l *Ledger) EnvelopesOf(actor string) []string { return l.byHolder[actor] }

// Chain returns the envelope and its ancestors, the envelope first. The
// slice is shared: callers must not change it.
func (l *Ledger) Chain(id string) ([]*Envelope, *Violation) {
	if v, ok := l.Envelopes[id]; ok && v.chain != nil {
		return v.chain, nil
	}
	return l.walkChain(id)
}

// keepDerived stores in v, once it is in the ledger, what the rules derive
// from its logged fields, which never change: its grants compiled, and
// its chain and the claims that name it, if the chain is whole.
func (l *Ledger) keepDerived(v *Envelope) {
	v.grants, v.holdOn = compileGrants(v.Grants), compileGrants(v.HoldOn)
	v.key = envelopeKey(v.ID)
	if chain, bad := l.walkChain(v.ID); bad == nil {
		v.chain = chain[:len(chain):len(chain)] // an append by a caller copies
		cs := appendChainClaims(nil, chain)
		v.chainClaims = cs[:len(cs):len(cs)]
		v.chainIDs = chainIDs(chain)
	}
}

// chainIDsOf is the ids of envelope id's chain (Chain), nil if the chain
// is broken: those kept with the envelope when it has them, shared (a
// Draw, which names them, is only read).
func (l *Ledger) chainIDsOf(id string) []string {
	if v, ok := l.Envelopes[id]; ok && v.chainIDs != nil {
		return v.chainIDs
	}
	chain, _ := l.Chain(id)
	return chainIDs(chain)
}

// chainIDs are the ids of chain's envelopes, in its order.
func chainIDs(chain []*Envelope) []string {
	var ids []string
	for _, e := range chain {
		ids = append(ids, e.ID)
	}
	return ids
}

// walkChain is Chain without the kept chains.
func (l *Ledger) walkChain(id string) ([]*Envelope, *Violation) {
	var chain []*Envelope
	for id != "" {
		v, ok := l.Envelopes[id]
		if !ok {
			return nil, inconsistent(NotFound, "envelope %s does not exist", id)
		}
		if len(chain) == MaxChain {
			return nil, inconsistent(Invalid, "envelope %s is delegated more than %d deep", chain[0].ID, MaxChain)
		}
		chain = append(chain, v)
		id = v.Parent
	}
	return chain, nil
}

// LiveChain checks that an agent may act at time at under the envelope
// chain: no envelope of it revoked or expired, and every agent that
// delegated it still able to act. Quarantine is the quarantine gate's.
func (l *Ledger) LiveChain(chain []*Envelope, at event.Instant) *Violation {
	for i, v := range chain {
		switch {
		case v.Revoked:
			return refuse(Forbidden, "envelope %s is revoked", v.ID)
		case v.Expires.ReachedBy(at):
			return refuse(Forbidden, "envelope %s expired at %s", v.ID, v.Expires)
		}
		if i > 0 {
			if why := l.standing(l.Actors[v.Holder], at); why != nil {
				return refuse(Forbidden, "envelope %s was delegated by %s, who may no longer act: %s", chain[0].ID, v.Holder, why.Reason)
			}
		}
	}
	return nil
}

// envelope.issued: a human issues an envelope to an agent it oversees,
// within its own grants; an agent delegates part of a live envelope it
// holds to another agent, within what the parent grants, has left and
// lasts (Def. 4.13, Remark 4.3).
var envelopeIssuedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.read(actorKey(ev.Envelope.Holder))
		c.chain(ev.Envelope.Parent)
		c.write(envelopeKey(ev.Envelope.ID))
	},
	gates: byActor(
		newGate(GateAuthority, func(c *checker) *Violation {
			e := c.ev.Envelope
			if e.Issuer != c.actor.ID {
				return inconsistent(Invalid, "envelope %s names issuer %s but %s issued it", e.ID, e.Issuer, c.actor.ID)
			}
			if _, ok := c.l.Envelopes[e.ID]; ok {
				return inconsistent(Conflict, "envelope %s already exists", e.ID)
			}
			holder, ok := c.l.Actors[e.Holder]
			switch {
			case !ok:
				return inconsistent(NotFound, "holder %s does not exist", e.Holder)
			case holder.IsHuman():
				return inconsistent(Invalid, "envelopes are for agents; %s is a human", holder.ID)
			case holder.ID == c.actor.ID:
				return refuse(Forbidden, "%s cannot issue an envelope to itself", c.actor.ID)
			case !holder.Active():
				return refuse(Forbidden, "holder %s is %s", holder.ID, holder.Status)
			}
			if c.actor.IsHuman() {
				if e.Parent != "" {
					return inconsistent(Invalid, "a human issues envelopes from its own authority; parent is for agents delegating")
				}
				if c.actor.ID != RootID && holder.Creator != c.actor.ID {
					return refuse(Forbidden, "only root or %s's creator issues it envelopes", holder.ID)
				}
			} else if e.Parent == "" {
				return inconsistent(Forbidden, "agent %s may only delegate an envelope it holds (name it as parent)", c.actor.ID)
			}
			if e.Expires.ReachedBy(c.at) {
				return refuse(Invalid, "envelope %s expires at %s, not after it is issued", e.ID, e.Expires)
			}
			return nil
		}),
		newGate(GateEnvelope, func(c *checker) *Violation {
			e := c.ev.Envelope
			if e.Parent == "" {
				return nil
			}
			chain, v := c.l.Chain(e.Parent)
			if v != nil {
				return v
			}
			if len(chain) >= MaxChain {
				return inconsistent(Invalid, "envelope %s would be delegated more than %d deep", e.ID, MaxChain)
			}
			if chain[0].Holder != e.Issuer {
				return inconsistent(Forbidden, "envelope %s delegates %s, which %s does not hold", e.ID, chain[0].ID, e.Issuer)
			}
			if v := c.l.LiveChain(chain, c.at); v != nil {
				return v
			}
			for _, p := range chain {
				if q := c.l.Quarantined(p.Holder, c.ev.Session, c.at); q != nil && p != chain[0] {
					return refuse(Forbidden, "envelope %s was delegated by %s, who is quarantined (%s) until %s", e.Parent, p.Holder, q.Reason, q.ExpiresAt)
				}
				if !p.Expires.IsZero() && (e.Expires.IsZero() || e.Expires.After(p.Expires)) {
					return refuse(Forbidden, "a sub-envelope may not outlast %s, which expires at %s", p.ID, p.Expires)
				}
			}
			return nil
		}),
		newGate(GateBoundary, func(c *checker) *Violation {
			e := c.ev.Envelope
			if e.Parent == "" {
				if err := covers(c.actor.Grants, e.Grants); err != nil {
					return refuse(Forbidden, "grants: %v (Def. 4.13: targets × actions ⊆ W(issuer))", err)
				}
				return nil
			}
			if err := covers(c.l.Envelopes[e.Parent].Grants, e.Grants); err != nil {
				return refuse(Forbidden, "grants: %v (a sub-envelope is a subset of its parent, Remark 4.3)", err)
			}
			return nil
		}),
		newGate(GateEnergy, func(c *checker) *Violation {
			e := c.ev.Envelope
			if e.Parent == "" {
				return nil
			}
			chain, _ := c.l.Chain(e.Parent)
			for _, p := range chain {
				if have := c.remaining(p); e.Budget > have {
					return inconsistent(NoEnergy, "budget %d exceeds what envelope %s has left (%d)", e.Budget, p.ID, have)
				}
			}
			return nil
		}),
	),
	// A delegation takes nothing from its parent when folded, but while it
	// is in flight its budget is held on the chain, so that spending
	// decided meanwhile cannot leave the parent unable to cover it.
	draw: func(l *Ledger, ev *event.Event) Draw {
		e := ev.Envelope
		if e.Parent == "" {
			return Draw{}
		}
		return Draw{Amount: e.Budget, Envelopes: l.chainIDsOf(e.Parent)}
	},
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		v := &Envelope{Envelope: *ev.Envelope, IssuedAt: index}
		l.Envelopes[v.ID] = v
		l.keepDerived(v)
		l.countSealer(v.SealPayloads)
		l.byHolder[v.Holder] = append(l.byHolder[v.Holder], v.ID)
		l.touchEnvelope(v)
	},
}

// envelope.revoked: root, the envelope's issuer or the human at the root of
// its chain revokes it; its sub-envelopes stop working with it.
var envelopeRevokedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(envelopeKey(ev.EnvelopeEnd.ID))
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		id := c.ev.EnvelopeEnd.ID
		chain, v := c.l.Chain(id)
		if v != nil {
			return v
		}
		if chain[0].Revoked {
			return inconsistent(Conflict, "envelope %s is already revoked", id)
		}
		if by := c.actor.ID; by != RootID && chain[0].Issuer != by && chain[len(chain)-1].Issuer != by {
			return refuse(Forbidden, "only root, the issuer or the human at the root of its chain revokes envelope %s", id)
		}
		return nil
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) { l.revoke([]string{ev.EnvelopeEnd.ID}) },
}

// revoke marks the listed envelopes revoked; one already revoked stays so,
// which keeps a kill and a concurrent revocation commutative.
func (l *Ledger) revoke(ids []string) {
	for _, id := range ids {
		if v := l.Envelopes[id]; !v.Revoked {
			v.Revoked = true
			l.touchEnvelope(v)
		}
	}
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindEnvelopeIssued] = envelopeIssuedRule
	rules[event.KindEnvelopeRevoked] = envelopeRevokedRule
}
