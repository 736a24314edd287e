package ledger

import (
	"slices"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/ring"
)

// Descriptor is a registered action descriptor and what it classifies.
type Descriptor struct {
	event.DescriptorRegistration
	Version      uint64 `json:"version"`
	RegisteredAt uint64 `json:"registered_at"`

	// appliesTo is AppliesTo compiled (compiledGrants).
	appliesTo compiledGrants
}

// newDescriptor is a descriptor as it enters the ledger, its grants
// compiled.
func newDescriptor(d *Descriptor) *Descriptor {
	d.appliesTo = compileGrants(d.AppliesTo)
	return d
}

// Elevation is a granted elevation; Ended is empty while it holds.
type Elevation struct {
	event.Elevation
	Session   string `json:"session,omitempty"`
	GrantedAt uint64 `json:"granted_at"`
	Ended     string `json:"ended,omitempty"`
	EndedAt   uint64 `json:"ended_at,omitempty"`
}

// ActiveElevation returns the agent's elevation in session sess (or for
// all sessions, "") that holds at time at: not ended, and not run out by
// then. An elevation can have run out before the kernel records its end,
// so every one is looked at.
func (l *Ledger) ActiveElevation(agent, sess string, at event.Instant) *Elevation {
	for _, id := range l.elevationsOf[agent] {
		if v := l.Elevations[id]; v.Ended == "" && v.Session == sess && !v.Expires.ReachedBy(at) {
			return v
		}
	}
	return nil
}

// ElevationsOf lists the agent's elevations that have not ended.
func (l *Ledger) ElevationsOf(agent string) []*Elevation {
	var out []*Elevation
	for _, id := range l.elevationsOf[agent] {
		if v := l.Elevations[id]; v.Ended == "" {
			out = append(out, v)
		}
	}
	return out
}

// agent.ring: a human who oversees an agent records its trust score and
// the ring it gives, or a less privileged one (§4).
var ringAssignedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(actorKey(ev.Ring.Agent))
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		_, v := c.l.oversee(c.ev.Actor, c.ev.Ring.Agent)
		return v
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		r := ev.Ring
		a := l.Actors[r.Agent]
		rg := r.Ring
		a.Ring, a.TrustBP, a.Consensus = &rg, r.TrustBP, r.Consensus
		l.touchActor(a)
	},
}

// rings.configured: root sets the Ring 2 network allowlist (§7.2).
var ringsConfiguredRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(ClaimRules)
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		if c.ev.Actor != RootID {
			return inconsistent(Forbidden, "only root configures the rings")
		}
		return nil
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		l.RingConfig = *ev.RingConfig
		l.touch("meta")
	},
}

// action.registered: root registers an action descriptor (§5): it decides
// the ring every agent needs for the actions it applies to.
var actionRegisteredRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(ClaimRules)
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		if v := c.human(); v != nil {
			return v
		}
		if c.ev.Actor != RootID {
			return refuse(Forbidden, "only root registers action descriptors")
		}
		return nil
	})),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		id := ev.Descriptor.Descriptor.ActionID
		d := newDescriptor(&Descriptor{DescriptorRegistration: *ev.Descriptor, Version: 1, RegisteredAt: index})
		if old, ok := l.Descriptors[id]; ok {
			d.Version = old.Version + 1
		} else {
			i, _ := slices.BinarySearch(l.descriptorIDs, id)
			l.descriptorIDs = slices.Insert(l.descriptorIDs, i, id)
		}
		l.Descriptors[id] = d
		l.touch("descriptor/" + id)
	},
}

// elevation.granted: a time-bounded ring elevation (§8), asked for by the
// agent itself or granted by a human who oversees it (which attests a
// Ring 1 elevation), decided by ring.DecideElevation on the agent's
// recorded trust score.
var elevationGrantedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(actorKey(ev.Elevation.Agent))
		c.write("elevation/" + ev.Elevation.ID) // its id is new
	},
	gates: byActor(
		newGate(GateAuthority, func(c *checker) *Violation {
			e := c.ev.Elevation
			if _, ok := c.l.Elevations[e.ID]; ok {
				return inconsistent(Conflict, "elevation %s already exists", e.ID)
			}
			a, v := c.l.agent(e.Agent)
			if v != nil {
				return v
			}
			if c.ev.Actor != a.ID {
				if _, v := c.l.oversee(c.ev.Actor, a.ID); v != nil {
					return v
				}
				if e.AttestedBy != c.ev.Actor {
					return inconsistent(Invalid, "elevation %s granted by %s must be attested by %s", e.ID, c.ev.Actor, c.ev.Actor)
				}
			} else if e.AttestedBy != "" {
				return inconsistent(Invalid, "elevation %s is attested by %s but granted by the agent itself", e.ID, e.AttestedBy)
			}
			return c.l.sessionExists(c.ev.Session)
		}),
		newGate(GateActor, func(c *checker) *Violation {
			return c.l.standing(c.l.Actors[c.ev.Elevation.Agent], c.at)
		}),
		newGate(GateRing, func(c *checker) *Violation {
			e := c.ev.Elevation
			a := c.l.Actors[e.Agent]
			if e.From != int(a.BaseRing()) {
				return inconsistent(Invalid, "elevation %s starts from ring %d, %s is at ring %d", e.ID, e.From, a.ID, a.BaseRing())
			}
			if e.TrustBP != a.TrustBP {
				return refuse(Invalid, "elevation %s records trust %d bp, %s's recorded score is %d bp", e.ID, e.TrustBP, a.ID, a.TrustBP)
			}
			trust := ring.Score(a.TrustBP)
			var trustp *ring.Score
			if a.Ring != nil {
				trustp = &trust // no recorded score: "trust score is missing" (§8.3)
			}
			// An elevation whose expiry has passed at this event's time no
			// longer holds, even before the kernel records its end.
			active := c.l.ActiveElevation(a.ID, c.ev.Session, c.at) != nil
			asked := e.Expires.Sub(c.at.Time)
			ttl, denial := ring.DecideElevation(ring.ElevationRequest{Agent: a.ID, Session: c.ev.Session, Current: a.BaseRing(),
				Target: ring.Ring(e.Ring), TTL: asked, Attested: e.AttestedBy != "", Trust: trustp}, active)
			if denial != "" {
				v := refuse(Forbidden, "elevation of %s from %s to %s denied: %s", a.ID, a.BaseRing(), ring.Ring(e.Ring), DescribeElevationDenial(denial))
				if denial == ring.DuplicateElevation {
					v = inconsistent(Conflict, "%s", v.Reason)
				}
				v.Code = string(denial)
				return v
			}
			if asked <= 0 || ttl != asked {
				return refuse(Invalid, "elevation %s lasts %v; an elevation lasts more than 0 and at most %v (§8.5)", e.ID, asked, ring.MaxElevationTTL)
			}
			return nil
		}),
	),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		v := ev.Elevation
		l.Elevations[v.ID] = &Elevation{Elevation: *v, Session: ev.Session, GrantedAt: index}
		l.elevationsOf[v.Agent] = append(l.elevationsOf[v.Agent], v.ID)
		l.touch("elevation/" + v.ID)
	},
}

// DescribeElevationDenial explains one of §8.3's denial reasons.
func DescribeElevationDenial(r ring.DenialReason) string {
	switch r {
	case ring.Ring0Forbidden:
		return "ring_0_forbidden (Ring 0 is never granted through the API, §8.7)"
	case ring.InvalidTarget:
		return "invalid_target (the target must be more privileged than the current ring)"
	case ring.DuplicateElevation:
		return "duplicate_elevation (the agent already holds an elevation in this session)"
	case ring.InsufficientTrust:
		return "insufficient_trust (Ring 1 needs a recorded trust score >= 0.85, Ring 2 >= 0.50, §8.4)"
	case ring.NoSponsorship:
		return "no_sponsorship (Ring 1 needs the attestation of a human who oversees the agent: the human requests it)"
	case ring.ExpiredTTL:
		return "expired_ttl (the requested time to live is negative)"
	}
	return string(r)
}

// elevation.ended: the agent or a human who oversees it revokes an
// elevation; the kernel records one that has run out, or that its agent's
// recorded trust score no longer earns (§8.4: after a demotion).
var elevationEndedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(actorKey(ev.ElevationEnd.Agent))
	},
	byKernel: true,
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		e := c.ev.ElevationEnd
		v, ok := c.l.Elevations[e.ID]
		switch {
		case !ok || v.Agent != e.Agent:
			return inconsistent(NotFound, "elevation %s of %s does not exist", e.ID, e.Agent)
		case v.Ended != "":
			return inconsistent(Conflict, "elevation %s already %s", e.ID, v.Ended)
		case e.End == event.EndExpired && c.ev.Actor != event.KernelActor:
			return inconsistent(Forbidden, "only the kernel expires elevation %s", e.ID)
		case e.End == event.EndExpired && !v.Expires.ReachedBy(c.at):
			return refuse(Conflict, "elevation %s runs until %s, not out at %s", e.ID, v.Expires, c.at)
		case e.End == event.EndRevoked && c.ev.Actor != e.Agent:
			if _, why := c.l.oversee(c.ev.Actor, e.Agent); why != nil {
				return why
			}
		case e.End == event.EndUntrusted && c.ev.Actor != event.KernelActor:
			return inconsistent(Forbidden, "only the kernel ends elevation %s for its agent's trust", e.ID)
		case e.End == event.EndUntrusted:
			a, ok := c.l.Actors[e.Agent]
			if !ok {
				return inconsistent(NotFound, "agent %s does not exist", e.Agent)
			}
			trust := ring.Score(a.TrustBP)
			if _, denial := ring.DecideElevation(ring.ElevationRequest{Agent: a.ID, Current: ring.Ring(v.From), Target: ring.Ring(v.Ring), Attested: true, Trust: &trust}, false); denial != ring.InsufficientTrust {
				return refuse(Conflict, "elevation %s to Ring %d is still earned by %s's recorded trust score (%d bp)", e.ID, v.Ring, a.ID, a.TrustBP)
			}
		}
		return nil
	})),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		v := l.Elevations[ev.ElevationEnd.ID]
		v.Ended, v.EndedAt = ev.ElevationEnd.End, index
		l.touch("elevation/" + v.ID)
	},
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindRingAssigned] = ringAssignedRule
	rules[event.KindRingsConfigured] = ringsConfiguredRule
	rules[event.KindActionRegistered] = actionRegisteredRule
	rules[event.KindElevationGranted] = elevationGrantedRule
	rules[event.KindElevationEnded] = elevationEndedRule
}
