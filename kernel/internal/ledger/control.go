package ledger

import (
	"fmt"
	"slices"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/signal"
	"github.com/annal-dev/annal/kernel/saga"
)

// Control is the execution control state (Agent Hypervisor Execution
// Control 1.0, Agent OS policies): what the fold of agent.ring,
// elevation.*, session.*, quarantine.*, agent.killed, saga.*, policy.* and
// signal.* events gives. Whether an elevation or a quarantine has run out
// is decided against an event's time, from the expiry recorded here.
type Control struct {
	RingConfig  event.RingConfig       `json:"ring_config"`
	Descriptors map[string]*Descriptor `json:"descriptors"`
	Elevations  map[string]*Elevation  `json:"elevations"`
	Sessions    map[string]*Session    `json:"sessions"`
	// Quarantines are keyed by QuarantineKey(agent, session).
	Quarantines map[string]*Quarantine `json:"quarantines"`
	Sagas       map[string]*Saga       `json:"sagas"`
	Policies    map[string]*Policy     `json:"policies"`
	// Intents are the open execute intents, keyed by their log index.
	Intents map[string]*Intent `json:"intents"`
	// Nonces are the signed requests' nonces still within reach of a
	// replay, keyed "<signer>:<nonce>" (signed.go).
	Nonces map[string]*Nonce `json:"nonces"`
	// Erased are the erased data subjects (sealed.go).
	Erased map[string]*Erased `json:"erased"`
	Kills  uint64             `json:"kills"`

	descriptorIDs []string // sorted, for a deterministic classification
}

func newControl() Control {
	return Control{
		Descriptors: map[string]*Descriptor{}, Elevations: map[string]*Elevation{}, Sessions: map[string]*Session{},
		Quarantines: map[string]*Quarantine{}, Sagas: map[string]*Saga{}, Policies: map[string]*Policy{},
		Intents: map[string]*Intent{}, Nonces: map[string]*Nonce{}, Erased: map[string]*Erased{},
	}
}

// Quarantine is a quarantine record; Ended is empty while it holds.
type Quarantine struct {
	event.Quarantine
	Session string `json:"session,omitempty"`
	Ended   string `json:"ended,omitempty"`
}

// QuarantineKey keys a quarantine: one agent in one session, or in every
// session when session is empty.
func QuarantineKey(agent, session string) string {
	if session == "" {
		return agent
	}
	return agent + "/" + session
}

// MaxQuarantine bounds one quarantine.
const MaxQuarantine = 30 * 24 * time.Hour

// Quarantined returns the quarantine that holds agent in sess (or in all
// sessions) at time at: not ended, and not run out by then.
func (l *Ledger) Quarantined(agent, sess string, at event.Instant) *Quarantine {
	if len(l.Quarantines) == 0 {
		return nil // every action asks, and most logs hold none
	}
	if q := l.liveQuarantine(QuarantineKey(agent, ""), at); q != nil || sess == "" {
		return q
	}
	return l.liveQuarantine(QuarantineKey(agent, sess), at)
}

// liveQuarantine is the quarantine of key, if it holds at time at.
func (l *Ledger) liveQuarantine(key string, at event.Instant) *Quarantine {
	if q, ok := l.Quarantines[key]; ok && q.Ended == "" && !q.ExpiresAt.ReachedBy(at) {
		return q
	}
	return nil
}

// quarantine.started: a human who oversees an agent quarantines it, in one
// session or in all, from the event's time for at most MaxQuarantine.
// Quarantining it again restarts the period.
var quarantineStartedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(actorKey(ev.Quarantine.Agent))
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		q := c.ev.Quarantine
		if _, v := c.l.oversee(c.ev.Actor, q.Agent); v != nil {
			return v
		}
		if v := c.l.sessionExists(c.ev.Session); v != nil {
			return v
		}
		if !q.StartedAt.Equal(c.at.Time) || q.ExpiresAt.Sub(q.StartedAt.Time) > MaxQuarantine {
			return refuse(Invalid, "a quarantine starts at its event's time (%s, not %s) and lasts at most %v", c.at, q.StartedAt, MaxQuarantine)
		}
		return nil
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		key := QuarantineKey(ev.Quarantine.Agent, ev.Session)
		l.Quarantines[key] = &Quarantine{Quarantine: *ev.Quarantine, Session: ev.Session}
		l.touch("quarantine/" + key)
	},
}

// quarantine.ended: a human who oversees the agent releases it, or the
// kernel records a quarantine that has run out.
var quarantineEndedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(actorKey(ev.Quarantine.Agent))
	},
	byKernel: true,
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		q := c.ev.Quarantine
		rec, ok := c.l.Quarantines[QuarantineKey(q.Agent, c.ev.Session)]
		switch {
		case !ok || rec.Ended != "":
			return inconsistent(Conflict, "%s is not quarantined (session %q)", q.Agent, c.ev.Session)
		case q.End == event.EndExpired && c.ev.Actor != event.KernelActor:
			return inconsistent(Forbidden, "only the kernel expires a quarantine")
		case q.End == event.EndExpired && !rec.ExpiresAt.ReachedBy(c.at):
			return refuse(Conflict, "the quarantine of %s runs until %s, not out at %s", q.Agent, rec.ExpiresAt, c.at)
		case q.End == event.EndReleased:
			_, v := c.l.oversee(c.ev.Actor, q.Agent)
			return v
		}
		return nil
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		key := QuarantineKey(ev.Quarantine.Agent, ev.Session)
		l.Quarantines[key].Ended = ev.Quarantine.End
		l.touch("quarantine/" + key)
	},
}

// checkRevokes checks that every listed envelope is the agent's.
func (l *Ledger) checkRevokes(agent string, ids []string) *Violation {
	for _, id := range ids {
		if v, ok := l.Envelopes[id]; !ok || v.Holder != agent {
			return inconsistent(Invalid, "envelope %s is not %s's", id, agent)
		}
	}
	return nil
}

// terminate ends an agent for good: under Rules a terminated agent is
// final; logs under RulesLegacy froze it.
func (l *Ledger) terminate(a *Actor) {
	switch {
	case l.Rules >= RulesGoverned:
		a.Status = event.StatusTerminated
	case a.Status != event.StatusTerminated:
		a.Status = event.StatusFrozen
	}
	l.touchActor(a)
}

// agent.killed: a human who oversees an agent kills it (§12): its envelopes
// are revoked, its in-flight saga steps handed off or marked for
// compensation, and it is terminated, for good.
var killRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.read(ClaimCensus)
		c.write(actorKey(ev.Kill.Agent))
		for _, id := range ev.Kill.Revoked {
			c.write(envelopeKey(id))
		}
		for _, h := range ev.Kill.Handoffs {
			c.write("saga/" + h.Saga)
			if h.To != "" {
				c.read(actorKey(h.To)) // the substitute must be able to act
			}
		}
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		k := c.ev.Kill
		a, v := c.l.oversee(c.ev.Actor, k.Agent)
		if v != nil {
			return v
		}
		if a.Status == event.StatusTerminated {
			return refuse(Conflict, "%s is terminated already", a.ID)
		}
		if v := c.l.sessionExists(c.ev.Session); v != nil {
			return v
		}
		if v := c.l.checkRevokes(a.ID, k.Revoked); v != nil {
			return v
		}
		if _, err := c.l.handOff(k); err != nil {
			return inconsistent(Conflict, "kill %s: %v", k.KillID, err)
		}
		for _, h := range k.Handoffs {
			if h.Status != event.HandoffDone {
				continue
			}
			if v := c.l.MayAct(h.To, c.ev.Session, c.at); v != nil {
				return refuse(Forbidden, "kill %s hands step %s to %s, who may not act: %s", k.KillID, h.Step, h.To, v.Reason)
			}
		}
		return nil
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		k := ev.Kill
		changed, _ := l.handOff(k)
		for id, s := range changed {
			l.Sagas[id].Saga = *s
			l.touch("saga/" + id)
		}
		l.revoke(k.Revoked)
		l.terminate(l.Actors[k.Agent])
		l.Kills++
		l.touch("meta")
	},
}

// handOff applies a kill's handoffs to copies of the sagas they name.
func (l *Ledger) handOff(k *event.Kill) (map[string]*saga.Saga, error) {
	changed := map[string]*saga.Saga{}
	for _, h := range k.Handoffs {
		s, ok := changed[h.Saga]
		if !ok {
			cur, exists := l.Sagas[h.Saga]
			if !exists {
				return nil, fmt.Errorf("kill hands off a step of unknown saga %s", h.Saga)
			}
			s = cur.Saga.Clone()
			changed[h.Saga] = s
		}
		var err error
		if h.Status == event.HandoffDone {
			err = s.HandOff(h.Step, h.To)
		} else if s.State == saga.Running {
			err = s.Abort("agent " + k.Agent + " killed (" + k.Reason + ")")
		}
		if err != nil {
			return nil, err
		}
	}
	return changed, nil
}

// QueuedSignal is a signal handed to an agent's own handler.
type QueuedSignal struct {
	Index  uint64 `json:"index"`
	Signal string `json:"signal"`
	Reason string `json:"reason,omitempty"`
}

// MaxQueuedSignals bounds what the ledger keeps of an agent's queue.
const MaxQueuedSignals = 32

// SignalState is the agent's state as signals see it.
func (l *Ledger) SignalState(a *Actor) signal.AgentState {
	switch {
	case a.Status == event.StatusTerminated || (a.Status != event.StatusActive && l.Rules < RulesGoverned):
		return signal.Terminated
	case a.Stopped || a.Status == event.StatusFrozen:
		return signal.Stopped
	}
	return signal.Running
}

// Deliver decides a signal's effect on an agent (Agent OS signal dispatch)
// from its state and mask, and which envelopes a terminating one revokes.
func (l *Ledger) Deliver(a *Actor, sig signal.Signal) (effect string, revoked []string, err error) {
	var mask signal.Mask
	for _, name := range a.SignalMask {
		s, err := signal.Parse(name)
		if err != nil {
			return "", nil, err
		}
		if mask, err = mask.With(s); err != nil {
			return "", nil, err
		}
	}
	e, _, err := signal.Deliver(l.SignalState(a), mask, sig)
	if err != nil {
		return "", nil, fmt.Errorf("agent %s: %w", a.ID, err)
	}
	if string(e) == event.EffectTerminate {
		for _, id := range l.byHolder[a.ID] {
			if !l.Envelopes[id].Revoked {
				revoked = append(revoked, id)
			}
		}
	}
	return string(e), revoked, nil
}

// RulesPolicyKill lets the kernel send SIGKILL, not only SIGPOLICY, to an
// agent that breaks a policy asking for it: seed 002's kernel answers a
// policy violation with SIGKILL.
const RulesPolicyKill = 6

// kernelMaySend says whether the kernel may send sig on its own: on a
// policy violation, SIGKILL (from RulesPolicyKill) or SIGPOLICY (before).
func (l *Ledger) kernelMaySend(sig string) *Violation {
	switch {
	case sig == signal.SIGKILL.String() && l.Rules >= RulesPolicyKill:
		return nil
	case sig == signal.SIGPOLICY.String():
		return nil
	case l.Rules >= RulesPolicyKill:
		return refuse(Forbidden, "the kernel sends SIGKILL or SIGPOLICY only, not %s", sig)
	}
	return refuse(Forbidden, "the kernel sends SIGPOLICY only, not %s", sig)
}

// signal.sent: a human who oversees an agent sends it a signal, or the
// kernel sends SIGKILL (SIGPOLICY before RulesPolicyKill) on a policy
// violation; the recorded effect is the one Deliver gives. SIGKILL, SIGPOLICY, SIGTRUST and an unmasked SIGTERM
// terminate the agent for good.
var signalSentRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.read(ClaimCensus)
		c.write(actorKey(ev.Signal.Agent))
		for _, id := range ev.Signal.Revoked {
			c.write(envelopeKey(id))
		}
	},
	byKernel: true,
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		s := c.ev.Signal
		a, v := c.l.agent(s.Agent)
		if v != nil {
			return v
		}
		if c.ev.Actor == event.KernelActor {
			if v := c.l.kernelMaySend(s.Signal); v != nil {
				return v
			}
		} else if _, v := c.l.oversee(c.ev.Actor, a.ID); v != nil {
			return v
		}
		sig, err := signal.Parse(s.Signal)
		if err != nil {
			return inconsistent(Invalid, "%v", err)
		}
		effect, _, err := c.l.Deliver(a, sig)
		switch {
		case err != nil:
			return refuse(Conflict, "%v", err)
		case effect != s.Effect:
			return refuse(Invalid, "%s to %s has effect %s, not %s", s.Signal, a.ID, effect, s.Effect)
		}
		return c.l.checkRevokes(a.ID, s.Revoked)
	})),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		sig := ev.Signal
		a := l.Actors[sig.Agent]
		switch sig.Effect {
		case event.EffectStop:
			a.Stopped = true
		case event.EffectContinue:
			a.Stopped = false
		case event.EffectTerminate:
			l.revoke(sig.Revoked)
			l.terminate(a)
		case event.EffectQueue:
			a.Signals = append(a.Signals, QueuedSignal{Index: index, Signal: sig.Signal, Reason: sig.Reason})
			if len(a.Signals) > MaxQueuedSignals {
				a.Signals = slices.Delete(a.Signals, 0, len(a.Signals)-MaxQueuedSignals)
			}
		}
		l.touchActor(a)
	},
}

// signal.masked: an agent sets which maskable signals it handles itself.
var signalMaskedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(actorKey(ev.SignalMask.Agent))
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		if c.ev.Actor != c.ev.SignalMask.Agent || c.actor.IsHuman() {
			return inconsistent(Forbidden, "%s set %s's signal mask; an agent sets only its own", c.ev.Actor, c.ev.SignalMask.Agent)
		}
		return nil
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		a := l.Actors[ev.SignalMask.Agent]
		a.SignalMask = slices.Clone(ev.SignalMask.Mask)
		l.touchActor(a)
	},
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindQuarantineStarted] = quarantineStartedRule
	rules[event.KindQuarantineEnded] = quarantineEndedRule
	rules[event.KindAgentKilled] = killRule
	rules[event.KindSignalSent] = signalSentRule
	rules[event.KindSignalMasked] = signalMaskedRule
}
