package ledger

import (
	"encoding/json"
	"fmt"

	"github.com/annal-dev/annal/kernel/event"
)

// Sealed payloads and erasure (RulesSealed, kernel/event/sealed.go). The
// fold checks, before an event's kind gates: that a log adopted the rules
// before it carries anything sealed; that no action seals a payload under a
// subject already erased; and that an actor or envelope that asks for
// sealed payloads has none of its actions write a payload into the log.
// subject.erased is a human's, once per subject.
//
// What the fold cannot see it does not judge: a policy's patterns read the
// payload, which the log of a sealed action does not hold. The kernel
// judges them on the plaintext when it decides (Options.Open), and so does
// `annald audit` while the payload is still kept; once a subject is erased
// nobody can, and those patterns are taken as the kernel decided them. The
// energy gates do not read the payload of a sealable action (its cost is
// its type's), so they are judged in every fold.

// RulesSealed adds sealed payloads, subject.erased and seal-requiring
// actors and envelopes.
const RulesSealed = 5

// Erased is an erased subject: the entry that erased it.
type Erased struct {
	Index uint64        `json:"index"`
	At    event.Instant `json:"at"`
}

func subjectKey(subject string) string { return "erased/" + subject }

func sealRefuse(class Class, format string, args ...any) *Violation {
	return (&Violation{Class: class, Reason: fmt.Sprintf(format, args...), since: RulesSealed}).at(GateSeal)
}

// checkSealed is run on every event before its kind's gates.
func checkSealed(c *checker) *Violation {
	l, ev := c.l, c.ev
	if usesSealing(ev) && l.Rules < RulesSealed {
		return sealRefuse(Invalid, "the log is under rules %d, which has no sealed payloads (rules %d)", l.Rules, RulesSealed)
	}
	a := ev.Action
	switch {
	case a == nil || (ev.Kind != event.KindAction && ev.Kind != event.KindHoldRequested):
		return nil
	case a.Sealed != nil:
		return l.checkSubjectLive(a.Sealed)
	}
	return checkSealRequired(c)
}

// usesSealing says whether ev uses what RulesSealed adds.
func usesSealing(ev *event.Event) bool {
	return ev.Erasure != nil || (ev.Action != nil && ev.Action.Sealed != nil) ||
		(ev.Subject != nil && ev.Subject.SealPayloads) || (ev.Envelope != nil && ev.Envelope.SealPayloads)
}

// checkSubjectLive: nothing more is sealed under an erased subject.
func (l *Ledger) checkSubjectLive(p *event.SealedPayload) *Violation {
	if e, ok := l.Erased[p.Subject]; ok {
		return sealRefuse(Conflict, "subject %s was erased at entry %d: nothing more is sealed under it", p.Subject, e.Index)
	}
	return nil
}

// checkSealRequired: an action whose actor, or an envelope of whose
// chain, asks that payloads be sealed writes none into the log. An action
// without a payload, and an execute, are not judged by it; an approved
// hold's action was judged when it was held.
func checkSealRequired(c *checker) *Violation {
	ev := c.ev
	a := ev.Action
	switch {
	case (a.Payload == nil && a.PayloadHash == "") || a.Type == event.Execute:
		return nil
	case ev.Kind == event.KindAction && ev.Hold != nil:
		return nil // the held request was checked when it was held
	}
	if act := c.actorNamed(ev.Actor); act != nil && act.SealPayloads {
		return sealRefuse(Forbidden, "%s asks that its payloads be sealed; this %s writes one into the log", ev.Actor, a.Type)
	}
	if a.Envelope == "" {
		return nil
	}
	for _, v := range c.chainOf(a.Envelope) {
		if v.SealPayloads {
			return sealRefuse(Forbidden, "envelope %s asks that payloads be sealed; this %s writes one into the log", v.ID, a.Type)
		}
	}
	return nil
}

func (l *Ledger) countSealer(seals bool) {
	if seals {
		l.sealers.Add(1)
	}
}

// AnyMustSeal reports whether any actor or envelope ever asked for sealed
// payloads: while none has, no action needs MustSeal's look-up. Like
// IdentifyCredential, it may be called without the ledger's lock.
func (l *Ledger) AnyMustSeal() bool { return l.sealers.Load() > 0 }

// MustSeal reports whether an action of actor under envelope must have its
// payload sealed, and under which subject when the request names none: the
// actor's own id.
func (l *Ledger) MustSeal(actor, envelope string) bool {
	if a, ok := l.Actors[actor]; ok && a.SealPayloads {
		return true
	}
	chain, _ := l.Chain(envelope)
	for _, v := range chain {
		if v.SealPayloads {
			return true
		}
	}
	return false
}

// payload is the action's payload as the gates may read it, and false for
// a sealed payload the fold was not given the plaintext of.
func (c *checker) payload() (json.RawMessage, bool) {
	a := c.ev.Action
	if a.Sealed == nil {
		return a.Payload, true
	}
	if c.opts.Open != nil {
		return c.opts.Open(a.Sealed)
	}
	return nil, false
}

// subject.erased: a human erases a subject's sealed payloads, once; the
// kernel erases a delta's changes when their retention ends.
var subjectErasedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(subjectKey(ev.Erasure.Subject))
		if ev.Session != "" {
			c.write(sessionKey(ev.Session)) // a delta's retention (retention.go)
		}
	},
	byKernel: true, // when a delta's retention ends (retention.go)
	gates: byActor(newGate(GateSeal, func(c *checker) *Violation {
		if c.ev.Actor == event.KernelActor {
			if v := retentionEnded(c); v != nil {
				return v
			}
		} else if v := c.human(); v != nil {
			return v
		}
		if e, ok := c.l.Erased[c.ev.Erasure.Subject]; ok {
			return inconsistent(Conflict, "subject %s was erased at entry %d already", c.ev.Erasure.Subject, e.Index)
		}
		return nil
	})),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		l.Erased[ev.Erasure.Subject] = &Erased{Index: index, At: ev.Time}
		l.touch(subjectKey(ev.Erasure.Subject))
		if ev.Session != "" {
			l.forgetRetained(ev.Session, ev.Erasure.Subject)
		}
	},
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindSubjectErased] = subjectErasedRule
}
