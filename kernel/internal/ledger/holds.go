package ledger

import (
	"github.com/annal-dev/annal/kernel/event"
)

// Hold states.
const (
	HoldPending  = "pending"
	HoldApproved = "approved"
	HoldRejected = "rejected"
	HoldTimedOut = "timed_out"
	HoldFailed   = "approve_failed"
)

// Hold is a held action.
type Hold struct {
	ID          string        `json:"id"`
	Actor       string        `json:"actor"`
	Envelope    string        `json:"envelope"`
	Session     string        `json:"session,omitempty"`
	Action      event.Action  `json:"action"`
	Reserved    uint64        `json:"reserved"`
	Deadline    event.Instant `json:"deadline,omitzero"`
	RequestedAt uint64        `json:"requested_at"`
	Status      string        `json:"status"`
	AnsweredBy  string        `json:"answered_by,omitempty"`
	AnsweredAt  uint64        `json:"answered_at,omitempty"`
	Settled     uint64        `json:"settled"`
	// Reason is the reason the event that ended the hold logged with it.
	Reason string `json:"reason,omitempty"`
}

// PendingHolds returns how many holds under envelope await an answer.
func (l *Ledger) PendingHolds(envelope string) int { return l.pendingHolds[envelope] }

// MayAnswer says whether by may answer hold h at time at: an active human,
// and root, the agent's creator, or the human who issued the root of the
// envelope chain (Def. 4.21).
func (l *Ledger) MayAnswer(by string, h *Hold, at event.Instant) *Violation {
	a, ok := l.Actors[by]
	if !ok || !a.IsHuman() {
		return inconsistent(Forbidden, "hold %s answered by %s: only humans answer holds", h.ID, by)
	}
	if v := l.standing(a, at); v != nil {
		return v
	}
	if a.ID == RootID {
		return nil
	}
	if agent, ok := l.Actors[h.Actor]; ok && agent.Creator == a.ID {
		return nil
	}
	if chain, v := l.Chain(h.Envelope); v == nil && chain[len(chain)-1].Issuer == a.ID {
		return nil
	}
	return refuse(Forbidden, "%s may not answer hold %s: only root, the agent's creator or the envelope's issuer may", a.ID, h.ID)
}

// hold.answered: a hold that ends without its action committing — rejected
// by a human who may answer it, timed out by the kernel once its deadline
// has passed, or approved but refused on re-check — settles the commitment
// cost ⌈percent × reserved⌉ (Def. 4.22) and releases the rest.
var holdAnsweredRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write("hold/" + ev.Hold.ID)
	},
	byKernel: true,
	gates: byActor(
		newGate(GateAuthority, func(c *checker) *Violation {
			ha := c.ev.Hold
			h, ok := c.l.Holds[ha.ID]
			switch {
			case !ok:
				return inconsistent(NotFound, "hold %s does not exist", ha.ID)
			case h.Status != HoldPending:
				return inconsistent(Conflict, "hold %s is already %s", h.ID, h.Status)
			case ha.Settled > h.Reserved:
				return inconsistent(Invalid, "hold %s settles %d, more than the %d it reserved", h.ID, ha.Settled, h.Reserved)
			}
			if ha.Decision == event.HoldTimeout {
				switch {
				case c.ev.Actor != event.KernelActor || ha.AnsweredBy != event.KernelActor:
					return inconsistent(Forbidden, "hold %s timed out by %s; only the kernel times holds out", h.ID, c.ev.Actor)
				case !h.Deadline.ReachedBy(c.at):
					return refuse(Conflict, "hold %s times out at %s, not yet at %s", h.ID, h.Deadline, c.at)
				}
			} else {
				if ha.AnsweredBy != c.ev.Actor {
					return inconsistent(Invalid, "hold %s answered_by %s, but %s answered it", h.ID, ha.AnsweredBy, c.ev.Actor)
				}
				if v := c.l.MayAnswer(c.ev.Actor, h, c.at); v != nil {
					return v
				}
			}
			if want := c.l.Energy.Commitment(h.Reserved); ha.Settled != want {
				return refuse(Invalid, "hold %s settles %d; its commitment cost is %d (Def. 4.22)", h.ID, ha.Settled, want)
			}
			return nil
		}),
		newGate(GateEnergy, func(c *checker) *Violation {
			h := c.l.Holds[c.ev.Hold.ID]
			a := c.l.Actors[h.Actor]
			chain, v := c.l.Chain(h.Envelope)
			if v != nil {
				return v
			}
			held := &checker{l: c.l, ev: c.ev, actor: a, at: c.at}
			return held.canSpend(chain, c.ev.Hold.Settled, h.Reserved)
		}),
	),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		ha := ev.Hold
		h := l.Holds[ha.ID]
		chain, _ := l.Chain(h.Envelope)
		l.settle(l.Actors[h.Actor], chain, ha.Settled, h.Reserved)
		switch ha.Decision {
		case event.HoldReject:
			h.Status = HoldRejected
		case event.HoldTimeout:
			h.Status = HoldTimedOut
		case event.HoldApprove:
			h.Status = HoldFailed
		}
		l.pendingHolds[h.Envelope]--
		h.AnsweredBy, h.AnsweredAt, h.Settled, h.Reason = ha.AnsweredBy, index, ha.Settled, ha.Reason
		l.touchHold(h)
	},
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindHoldAnswered] = holdAnsweredRule
}
