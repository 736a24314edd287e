package ledger

import (
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
)

// Claim names an object an event reads (shared) or changes (exclusive).
// Two events may be in flight together unless they claim one object and
// either claims it exclusively: then their effects may not commute, and
// the later one must be decided on a ledger that has folded the earlier.
type Claim struct {
	Key       string
	Exclusive bool
}

// The objects claims name.
const (
	// ClaimRules is every rule an action is checked against that lives in
	// the log for all actors: descriptors, policies, the ring settings.
	ClaimRules = "rules"
	// ClaimCensus is who is active and with what share: what energy
	// production divides among.
	ClaimCensus = "census"
)

func actorKey(id string) string    { return "actor/" + id }
func envelopeKey(id string) string { return "envelope/" + id }
func sessionKey(id string) string  { return "session/" + id }

// Claims returns what ev reads and changes, sorted by key, each key once
// (exclusive if ev both reads and changes it). It reads the ledger only to
// follow an envelope's chain, which never changes once issued.
func (l *Ledger) Claims(ev *event.Event) []Claim {
	var cs []Claim
	read := func(keys ...string) {
		for _, k := range keys {
			cs = append(cs, Claim{Key: k})
		}
	}
	write := func(keys ...string) {
		for _, k := range keys {
			cs = append(cs, Claim{Key: k, Exclusive: true})
		}
	}
	chain := func(id string) {
		if c, v := l.Chain(id); v == nil {
			for _, e := range c {
				read(envelopeKey(e.ID), actorKey(e.Holder))
			}
		}
	}
	if ev.Actor != event.KernelActor {
		read(actorKey(ev.Actor))
	}
	if ev.Session != "" {
		read(sessionKey(ev.Session))
	}
	switch ev.Kind {
	case event.KindAction, event.KindHoldRequested:
		read(ClaimRules)
		chain(ev.Action.Envelope)
		if ev.Kind == event.KindHoldRequested {
			// Pending holds per envelope are bounded: count them one by one.
			write("holds-of/" + ev.Hold.Envelope)
		} else if ev.Hold != nil {
			write("hold/" + ev.Hold.ID)
		}
	case event.KindHoldAnswered:
		write("hold/" + ev.Hold.ID)
	case event.KindActorCreated:
		read(ClaimCensus)
		write(actorKey(ev.Subject.ID))
	case event.KindActorStatus:
		read(ClaimCensus)
		write(actorKey(ev.Status.Actor))
	case event.KindEnergyProduced:
		write(ClaimCensus)
	case event.KindRulesAdopted:
		write(ClaimCensus, ClaimRules)
	case event.KindEnvelopeIssued:
		read(actorKey(ev.Envelope.Holder))
		chain(ev.Envelope.Parent)
		write(envelopeKey(ev.Envelope.ID))
	case event.KindEnvelopeRevoked:
		write(envelopeKey(ev.EnvelopeEnd.ID))
	case event.KindRingAssigned:
		write(actorKey(ev.Ring.Agent))
	case event.KindRingsConfigured, event.KindActionRegistered, event.KindPolicySet:
		write(ClaimRules)
	case event.KindElevationGranted:
		write(actorKey(ev.Elevation.Agent))
	case event.KindElevationEnded:
		write(actorKey(ev.ElevationEnd.Agent))
	case event.KindSessionCreated, event.KindSessionDelta:
		write(sessionKey(ev.Session))
	case event.KindSessionChanged:
		write(sessionKey(ev.Session))
		if c := ev.SessionChange; c.Granted != "" {
			read(sessionKey(c.Granted))
		} else if c.Agent != "" {
			read(actorKey(c.Agent))
		}
	case event.KindQuarantineStarted, event.KindQuarantineEnded:
		write(actorKey(ev.Quarantine.Agent))
	case event.KindAgentKilled:
		read(ClaimCensus)
		write(actorKey(ev.Kill.Agent))
		for _, id := range ev.Kill.Revoked {
			write(envelopeKey(id))
		}
		for _, h := range ev.Kill.Handoffs {
			write("saga/" + h.Saga)
		}
	case event.KindSignalSent:
		read(ClaimCensus)
		write(actorKey(ev.Signal.Agent))
		for _, id := range ev.Signal.Revoked {
			write(envelopeKey(id))
		}
	case event.KindSignalMasked:
		write(actorKey(ev.SignalMask.Agent))
	case event.KindSagaStarted:
		write("saga/" + ev.Saga.ID)
	case event.KindSagaStep:
		write("saga/" + ev.SagaStep.Saga)
	case event.KindPolicyAttached:
		if a := ev.PolicyAttachment.Agent; a != "" {
			write(actorKey(a))
		} else {
			write(envelopeKey(ev.PolicyAttachment.Envelope))
		}
	}
	slices.SortFunc(cs, func(a, b Claim) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if a.Exclusive == b.Exclusive {
			return 0
		}
		if a.Exclusive {
			return -1
		}
		return 1
	})
	return slices.CompactFunc(cs, func(a, b Claim) bool { return a.Key == b.Key })
}
