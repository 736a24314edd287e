package ledger

import (
	"math/bits"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/ring"
)

// Actor is an actor with its energy and execution-control state.
type Actor struct {
	event.ActorRecord
	Status    string `json:"status"`
	CreatedAt uint64 `json:"created_at"`
	// Balance is E(p): energy received, less energy given and settled.
	Balance uint64 `json:"balance"`
	// Reserved is locked by the actor's pending holds; Balance ≥ Reserved.
	Reserved uint64 `json:"reserved"`
	// Consumed is all energy the actor's actions and holds settled.
	Consumed uint64 `json:"consumed"`

	// Ring is the assigned ring, nil until a human assigns one (BaseRing
	// then gives Ring 3).
	Ring       *int           `json:"ring,omitempty"`
	TrustBP    uint64         `json:"trust_bp,omitempty"`
	Consensus  bool           `json:"consensus,omitempty"`
	Stopped    bool           `json:"stopped,omitempty"`
	SignalMask []string       `json:"signal_mask,omitempty"`
	Signals    []QueuedSignal `json:"signals,omitempty"`
	Policies   []string       `json:"policies,omitempty"`

	// key is the actor's key in the stored state and in claims
	// (actorKey(ID)), made once when it enters the ledger rather than on
	// every event that claims or changes it (stateKey). grants are its
	// Grants compiled (compiledGrants).
	key    string
	grants compiledGrants
}

// stateKey is the actor's key in the stored state and in claims.
func (a *Actor) stateKey() string {
	if a.key != "" {
		return a.key
	}
	return actorKey(a.ID) // an actor made outside the fold
}

// newActor is an actor as it enters the ledger, with what the rules derive
// from its id and grants, which never change.
func newActor(a *Actor) *Actor {
	a.key = actorKey(a.ID)
	a.grants = compileGrants(a.Grants)
	return a
}

// Available is what the actor may reserve now.
func (a *Actor) Available() uint64 { return a.Balance - a.Reserved }

// Active reports whether the actor's status lets it act.
func (a *Actor) Active() bool { return a.Status == event.StatusActive }

// IsHuman reports whether the actor is a human.
func (a *Actor) IsHuman() bool { return a.Kind == event.Human }

// BaseRing is the agent's assigned ring, Ring 3 until a human assigns one
// (§3.3). Humans stand outside the rings.
func (a *Actor) BaseRing() ring.Ring {
	if a.Ring == nil {
		return ring.Default
	}
	return ring.Ring(*a.Ring)
}

// GenesisShare is root's share of energy production in a log under Rules:
// every share an actor holds was given from it (Def. 4.16), so production
// is divided among a fixed total.
const GenesisShare = 1 << 20

// log.genesis: entry 0, the log's origin, energy model and root human.
var genesisRule = &rule{
	gates: []gate{newGate(GateForm, func(c *checker) *Violation {
		if c.ev.Actor != RootID || c.ev.Subject.ID != RootID {
			return inconsistent(Invalid, "the genesis creates the root human %q", RootID)
		}
		if r := c.ev.Log.Rules; r != 0 && (r < RulesGoverned || r > Rules) {
			return inconsistent(Invalid, "the genesis names rules version %d; this kernel knows %d to %d", r, RulesGoverned, Rules)
		}
		return nil
	})},
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		l.Origin = ev.Log.Origin
		l.Energy = event.DefaultEnergy
		if ev.Log.Energy != nil {
			l.Energy = *ev.Log.Energy
		}
		if ev.Log.Rules != 0 {
			l.Rules = ev.Log.Rules
		}
		root := newActor(&Actor{ActorRecord: *ev.Subject, Status: event.StatusActive, CreatedAt: index, Balance: l.Energy.Genesis})
		l.Actors[root.ID] = root
		l.addCredential(root)
		l.touchActor(root)
	},
}

// log.rules: the kernel adopts the rules of a newer release for a log that
// was written under older ones; from this entry on they all hold.
var rulesRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(ClaimCensus, ClaimRules)
	},
	byKernel: true,
	gates: []gate{actorGate, newGate(GateAuthority, func(c *checker) *Violation {
		switch {
		case c.ev.Actor != event.KernelActor:
			return inconsistent(Forbidden, "only the kernel adopts rules")
		case c.ev.Log.Origin != c.l.Origin:
			return inconsistent(Invalid, "log.rules names origin %q, the log is %q", c.ev.Log.Origin, c.l.Origin)
		case c.ev.Log.Rules <= c.l.Rules || c.ev.Log.Rules < RulesGoverned || c.ev.Log.Rules > Rules:
			return inconsistent(Conflict, "the log is under rules %d; log.rules adopts %d, this kernel knows up to %d", c.l.Rules, c.ev.Log.Rules, Rules)
		}
		return nil
	})},
	apply: func(l *Ledger, _ uint64, ev *event.Event) { l.Rules = ev.Log.Rules },
}

// actor.created: a human creates an actor (Remark 4.3: only humans create
// agents; only root creates humans), within its own grants, giving it
// energy and a share it has.
var actorCreatedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.read(ClaimCensus)
		c.write(actorKey(ev.Subject.ID))
		if ev.Subject.Share > 0 {
			c.write(actorKey(ev.Actor)) // the share given comes from the creator's
		}
	},
	gates: byActor(
		newGate(GateAuthority, func(c *checker) *Violation {
			rec := c.ev.Subject
			if v := c.human(); v != nil {
				return v
			}
			switch {
			case rec.Creator != c.actor.ID:
				return inconsistent(Invalid, "actor %s names creator %s but was created by %s", rec.ID, rec.Creator, c.actor.ID)
			case rec.Kind == event.Human && c.actor.ID != RootID:
				return inconsistent(Forbidden, "only root creates humans")
			}
			if _, ok := c.l.Actors[rec.ID]; ok {
				return inconsistent(Conflict, "actor %s already exists", rec.ID)
			}
			if c.l.credentialTaken(rec.CredentialSHA256) {
				return inconsistent(Conflict, "actor %s reuses another actor's credential", rec.ID)
			}
			if rec.Expires.ReachedBy(c.at) {
				return refuse(Invalid, "actor %s expires at %s, not after its creation", rec.ID, rec.Expires)
			}
			if rec.RequireSigned && rec.SigningKey == "" {
				return signedRefuse(Invalid, "actor %s would require signed requests without a signing key", rec.ID)
			}
			return nil
		}),
		newGate(GateBoundary, func(c *checker) *Violation {
			if err := covers(c.actor.Grants, c.ev.Subject.Grants); err != nil {
				return refuse(Forbidden, "grants of %s: %v", c.ev.Subject.ID, err)
			}
			return nil
		}),
		newGate(GateEnergy, func(c *checker) *Violation {
			rec := c.ev.Subject
			if have := c.available(c.actor); rec.Energy > have {
				return inconsistent(NoEnergy, "%s gives %d energy but has %d available", c.actor.ID, rec.Energy, have)
			}
			if c.l.Rules >= RulesGoverned && rec.Share > c.actor.Share {
				return refuse(NoEnergy, "%s gives a share of %d but holds %d: a share given away comes from the giver's", c.actor.ID, rec.Share, c.actor.Share)
			}
			return nil
		}),
	),
	draw: func(l *Ledger, ev *event.Event) Draw {
		return Draw{Actor: ev.Actor, Amount: ev.Subject.Energy}
	},
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		rec := *ev.Subject
		creator := l.Actors[ev.Actor]
		creator.Balance -= rec.Energy
		if l.Rules >= RulesGoverned {
			creator.Share -= rec.Share
		}
		a := newActor(&Actor{ActorRecord: rec, Status: event.StatusActive, CreatedAt: index, Balance: rec.Energy})
		l.Actors[a.ID] = a
		l.countSealer(a.SealPayloads)
		l.addCredential(a)
		l.touchActor(creator)
		l.touchActor(a)
	},
}

// actor.status: root or an agent's creator freezes, unfreezes or
// terminates it; humans are never frozen (Axiom 4.1) and terminated is
// final.
var actorStatusRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.read(ClaimCensus)
		c.write(actorKey(ev.Status.Actor))
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		sc := c.ev.Status
		if v := c.human(); v != nil {
			return v
		}
		a, v := c.l.oversee(c.actor.ID, sc.Actor)
		if v != nil {
			return v
		}
		switch {
		case a.Status == event.StatusTerminated:
			return inconsistent(Conflict, "%s is terminated; that is final", a.ID)
		case a.Status == sc.Status:
			return refuse(Conflict, "%s is already %s", a.ID, sc.Status)
		}
		return nil
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		a := l.Actors[ev.Status.Actor]
		a.Status = ev.Status.Status
		l.touchActor(a)
	},
}

// actor.key: an actor registers, rotates or revokes its own signing key
// (signing with its current key when it has one: a stolen bearer
// credential cannot replace it), or a human who oversees it does (root, or
// an agent's creator: recovery of a lost or compromised key).
var actorKeyRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.read(ClaimCensus)
		c.write(actorKey(ev.KeyChange.Actor))
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		kc := c.ev.KeyChange
		a, ok := c.l.Actors[kc.Actor]
		if !ok {
			return noActor(NotFound, kc.Actor)
		}
		if a.Status == event.StatusTerminated {
			return inconsistent(Conflict, "%s is terminated; that is final", a.ID)
		}
		if kc.RequireSigned && kc.Key == "" {
			return signedRefuse(Invalid, "%s would require signed requests without a signing key", a.ID)
		}
		if c.ev.Actor == kc.Actor {
			if a.SigningKey != "" && (c.ev.Signed == nil || c.ev.Signed.By != a.ID) {
				return signedRefuse(Unauthenticated, "%s has a signing key: changing it takes a request signed with it (or a human who oversees %s)", a.ID, a.ID)
			}
			return nil
		}
		if v := c.human(); v != nil {
			return v
		}
		if c.actor.ID != RootID && a.Creator != c.actor.ID {
			return signedRefuse(Forbidden, "%s may not change the signing key of %s: only the actor itself, its creator or root", c.actor.ID, a.ID)
		}
		return nil
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		a := l.Actors[ev.KeyChange.Actor]
		a.SigningKey, a.RequireSigned = ev.KeyChange.Key, ev.KeyChange.RequireSigned
		l.touchActor(a)
	},
}

// energy.produced: the kernel logs the energy of some ticks (Def.
// 4.15–4.16), divided exactly as Credits divides it.
var productionRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(ClaimCensus)
	},
	byKernel: true,
	gates: []gate{actorGate, newGate(GateAuthority, func(c *checker) *Violation {
		p := c.ev.Production
		if c.ev.Actor != event.KernelActor {
			return inconsistent(Forbidden, "energy produced by %s; only the kernel produces energy", c.ev.Actor)
		}
		var total uint64
		for _, cr := range p.Credits {
			a, ok := c.l.Actors[cr.Actor]
			if !ok {
				return inconsistent(NotFound, "energy credited to unknown actor %s", cr.Actor)
			}
			if a.Balance+cr.Amount > event.MaxEnergy {
				return inconsistent(Invalid, "actor %s would hold more than 2^53 energy", a.ID)
			}
			total += cr.Amount
		}
		if want := p.Ticks * c.l.Energy.PerTick; total > want {
			return inconsistent(Invalid, "%d ticks produce %d energy, the credits add up to %d", p.Ticks, want, total)
		}
		if want := c.l.Credits(p.Ticks); !slices.Equal(want, p.Credits) {
			return refuse(Invalid, "%d ticks are divided by the actors' shares as %v, not %v", p.Ticks, want, p.Credits)
		}
		return nil
	})},
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		for _, c := range ev.Production.Credits {
			a := l.Actors[c.Actor]
			a.Balance += c.Amount
			l.touchActor(a)
		}
	},
}

// Credits divides ticks × PerTick among the active actors with a share
// (Def. 4.16): each gets the floor of its proportion, and the units left
// over go one each to actors in id order, so the split is exact and the
// same on every replay. At most event.MaxCredits actors, the first by id,
// are credited in one event.
func (l *Ledger) Credits(ticks uint64) []event.Credit {
	type holder struct {
		id    string
		share uint64
	}
	var hs []holder
	for id, a := range l.Actors {
		if a.Active() && a.Share > 0 {
			hs = append(hs, holder{id, a.Share})
		}
	}
	if len(hs) == 0 {
		return nil
	}
	slices.SortFunc(hs, func(a, b holder) int { return strings.Compare(a.id, b.id) })
	hs = hs[:min(len(hs), event.MaxCredits)]
	var total uint64
	for _, h := range hs {
		total += h.share
	}
	produced := ticks * l.Energy.PerTick
	out := make([]event.Credit, len(hs))
	var given uint64
	for i, h := range hs {
		// ⌊produced × share / total⌋ in 128 bits: share ≤ total, so the
		// quotient fits.
		hi, lo := bits.Mul64(produced, h.share)
		amt, _ := bits.Div64(hi, lo, total)
		out[i] = event.Credit{Actor: h.id, Amount: amt}
		given += amt
	}
	for i := 0; given < produced; i = (i + 1) % len(out) {
		out[i].Amount++
		given++
	}
	return slices.DeleteFunc(out, func(c event.Credit) bool { return c.Amount == 0 })
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindGenesis] = genesisRule
	rules[event.KindRulesAdopted] = rulesRule
	rules[event.KindActorCreated] = actorCreatedRule
	rules[event.KindActorStatus] = actorStatusRule
	rules[event.KindActorKey] = actorKeyRule
	rules[event.KindEnergyProduced] = productionRule
}
