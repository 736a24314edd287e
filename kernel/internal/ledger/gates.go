package ledger

import (
	"slices"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/ring"
)

// The stages of the paper's pipeline (§5.2) that gates belong to.
const (
	StageValidate        = "validate"
	StageReserve         = "reserve"
	StageValidatePayload = "validate_payload"
)

// The gates a refusal names. Every event passes the gates of its kind's
// rule in order; an action passes them in ActionGateOrder. What each gate
// checks, and in which stage it runs, is written once, in gateTable (Gates).
const (
	GateForm       = "form"
	GateActor      = "actor"
	GateRateLimit  = "rate_limit"
	GateAuthority  = "authority"
	GateBoundary   = "boundary"
	GateEnvelope   = "envelope"
	GateQuarantine = "quarantine"
	GateSession    = "session"
	GateRing       = "ring"
	GateResources  = "resources"
	GatePolicy     = "policy"
	GateHold       = "hold"
	GateEnergy     = "energy"
	GatePayload    = "payload"
	GateSignature  = "signature"
	GateSeal       = "seal"
	GateIntent     = "intent"
)

// GateInfo is one gate: its name, the stage of the pipeline it runs in and
// what it checks.
type GateInfo struct {
	Name   string
	Stage  string
	Checks string
	// Recorded: a refusal at this gate of a well-formed action goes into
	// the log as an action.denied event, for auditors to see. Malformed
	// input and rate-limited floods are not recorded (that would let an
	// agent fill the log with the very requests the limit refuses).
	Recorded bool
}

// gateTable is the one description of every gate. The rules take each
// gate's stage from it (newGate), so a gate cannot run in a stage other than
// the one described.
var gateTable = []GateInfo{
	{GateForm, StageValidate, "the request and its event are well formed for its kind", false},
	{GateActor, StageValidate, "the actor exists, is active, not expired, not stopped (SIGSTOP)", true},
	{GateRateLimit, StageValidate, "the agent's token bucket, per agent and ring (Execution Control §9); live only, never logged", false},
	{GateAuthority, StageValidate, "who may do this: humans create actors, issue envelopes and answer holds; overseers control agents", false},
	{GateBoundary, StageValidate, "(target, type) ∈ W(actor); system/ and ledger/ are root's (Def. 4.11–4.12); grants are subsets of the granter's", true},
	{GateEnvelope, StageValidate, "an agent's state-changing action is within a live envelope that grants it, delegated by agents that may still act (Def. 4.13)", true},
	{GateQuarantine, StageValidate, "the agent, or a delegator of its envelope, is quarantined (§13)", true},
	{GateSession, StageValidate, "session state, participation, path isolation (§10–§11)", true},
	{GateRing, StageValidate, "effective ring against the action's required ring (§4–§6, §8)", true},
	{GateResources, StageValidate, "the ring's resource constraints (§7)", true},
	{GatePolicy, StageValidate, "attached policies: blocked actions and payload patterns (Agent OS)", true},
	{GateHold, StageValidate, "a hold rule matches: the action waits for a human (Def. 4.20)", true},
	{GateEnergy, StageReserve, "the actor and every envelope of the chain can pay (INV-5)", true},
	{GatePayload, StageValidatePayload, "execute payloads carry §5.6's fields", false},
	{GateSignature, StageValidate, "a signed request verifies and is what the event records; an actor or envelope that requires signatures has them", false},
	{GateSeal, StageValidate, "sealed payloads and erasures: nothing is sealed under an erased subject, nothing written in clear where sealing is required", false},
	{GateIntent, StageValidate, "an execute result completes an open intent of its actor, with the same action", false},
}

// gateStage is each gate's stage, from gateTable.
var gateStage = func() map[string]string {
	m := make(map[string]string, len(gateTable))
	for _, g := range gateTable {
		m[g.Name] = g.Stage
	}
	return m
}()

// Gates returns every gate a refusal can name, with its stage and what it
// checks, in the order of the pipeline.
func Gates() []GateInfo { return slices.Clone(gateTable) }

// Recorded reports whether a refusal at gate of a well-formed action is
// logged as an action.denied event (GateInfo.Recorded).
func Recorded(gate string) bool {
	for _, g := range gateTable {
		if g.Name == gate {
			return g.Recorded
		}
	}
	return false
}

// ActionGateOrder is the order of an action's gates: the action rule's, as
// its loop runs them. The form of a request is checked where it enters,
// before any of them.
var ActionGateOrder = gateNames(actionGates)

func gateNames(gates []gate) []string {
	names := make([]string, len(gates))
	for i, g := range gates {
		names[i] = g.name
	}
	return names
}

// ActionGates returns the stage and gate names of the action rule, in the
// order its loop runs them.
func ActionGates() [][2]string {
	var out [][2]string
	for _, g := range rules[event.KindAction].gates {
		out = append(out, [2]string{g.stage, g.name})
	}
	return out
}

// gate is one check of a rule.
type gate struct {
	stage string
	name  string
	check func(*checker) *Violation
}

// newGate is the gate name, run by check, in the stage gateTable gives it.
func newGate(name string, check func(*checker) *Violation) gate {
	stage, ok := gateStage[name]
	if !ok {
		panic("ledger: gate " + name + " is not in gateTable")
	}
	return gate{stage: stage, name: name, check: check}
}

// at says that v comes from gate name, in the stage the gate runs in.
func (v *Violation) at(name string) *Violation {
	v.Stage, v.Gate = gateStage[name], name
	return v
}

// checker carries one event through its gates, with the facts they share,
// computed once by the first gate that needs them (facts.go).
type checker struct {
	l    *Ledger
	ev   *event.Event
	rule *rule
	opts Options
	at   event.Instant
	// actor is the acting actor (nil for the kernel), set by the actor gate.
	actor *Actor

	facts     actionFacts
	haveFacts bool
}

// The gates every event by an actor passes first: who it is, the rate
// limit, and quarantine. An event the kernel writes on its own passes them
// as the kernel.
var (
	actorGate      = newGate(GateActor, checkActor)
	rateLimitGate  = newGate(GateRateLimit, checkRateLimit)
	quarantineGate = newGate(GateQuarantine, checkOwnQuarantine)
)

// byActor is the common gates and then a kind's own.
func byActor(own ...gate) []gate {
	return append([]gate{actorGate, rateLimitGate, quarantineGate}, own...)
}

// checkActor: the actor exists and may act now — active, not expired, not
// stopped. The kernel acts only in the kinds whose rule lets it.
func checkActor(c *checker) *Violation {
	if c.ev.Actor == event.KernelActor {
		if !c.rule.byKernel {
			return inconsistent(Forbidden, "the kernel does not write %s events", c.ev.Kind)
		}
		return nil
	}
	a := c.actorNamed(c.ev.Actor)
	if a == nil {
		return noActor(Unauthenticated, c.ev.Actor)
	}
	c.actor = a
	if c.rule.byRecord {
		return nil // a record of a refusal: the actor need not be able to act
	}
	return c.l.standing(a, c.at)
}

// standing says whether actor a may act at time at.
func (l *Ledger) standing(a *Actor, at event.Instant) *Violation {
	switch {
	case a.Status != event.StatusActive:
		return refuse(Forbidden, "actor %s is %s", a.ID, a.Status)
	case a.Expires.ReachedBy(at):
		return refuse(Forbidden, "actor %s expired at %s", a.ID, a.Expires)
	case a.Stopped:
		return refuse(Forbidden, "agent %s is stopped by SIGSTOP; SIGCONT resumes it", a.ID)
	}
	return nil
}

// MayAct says why agent id may not act at time at in session sess — its
// standing or a quarantine — or nil if it may.
func (l *Ledger) MayAct(id, sess string, at event.Instant) *Violation {
	a, ok := l.Actors[id]
	if !ok {
		return noActor(NotFound, id)
	}
	if v := l.standing(a, at); v != nil {
		return v
	}
	if q := l.Quarantined(id, sess, at); q != nil {
		return inQuarantine(id, q)
	}
	return nil
}

// checkRateLimit: every request an agent makes draws from its token bucket
// at its effective ring. Humans and the kernel are not limited, nor is a
// hold's approval (the human's act, not the agent's request).
func checkRateLimit(c *checker) *Violation {
	if c.opts.Admit == nil || c.actor == nil || c.actor.IsHuman() || c.rule.byRecord || c.isApproval() {
		return nil
	}
	var eff ring.Ring
	if c.haveFacts && c.facts.actor == c.actor {
		eff = c.facts.own // the agent is not human: its facts have it
	} else {
		eff, _ = c.l.EffectiveRing(c.actor, c.ev.Session, c.at)
	}
	if err := c.opts.Admit(c.actor.ID, eff); err != nil {
		return refuse(RateLimited, "%v", err)
	}
	return c.admitPolicies()
}

// admitPolicies draws from the agent's bucket under each policy attached
// to it that bounds its calls a minute (max_calls_per_minute).
func (c *checker) admitPolicies() *Violation {
	if c.opts.AdmitPolicy == nil {
		return nil
	}
	for _, name := range c.actor.Policies {
		p := c.l.Policies[name]
		if p == nil || p.MaxCallsPerMinute == 0 {
			continue
		}
		if err := c.opts.AdmitPolicy(c.actor.ID, name, p.MaxCallsPerMinute); err != nil {
			return refuse(RateLimited, "%v", err)
		}
	}
	return nil
}

// checkOwnQuarantine: a quarantined agent does nothing (§13), in the
// event's session or in all. A quarantine is lifted only by a human or by
// its expiry.
func checkOwnQuarantine(c *checker) *Violation {
	if c.actor == nil || c.actor.IsHuman() || c.rule.byRecord {
		return nil
	}
	if q := c.l.Quarantined(c.actor.ID, c.ev.Session, c.at); q != nil {
		return inQuarantine(c.actor.ID, q)
	}
	return nil
}

// grantQuery is the action's type and target as grants match them: the
// action's facts', or, for a checker without them (MayEver), its own.
func (c *checker) grantQuery() grantQuery {
	if c.haveFacts {
		return c.facts.query
	}
	return newGrantQuery(c.ev.Action.Type, c.ev.Action.Target)
}

// actorNamed is the actor id, or nil: for the event's own actor, the one
// its action's facts found.
func (c *checker) actorNamed(id string) *Actor {
	if c.haveFacts && id == c.ev.Actor {
		return c.facts.actor
	}
	return c.l.Actors[id]
}

// chainOf is Chain(id), or nil when the chain is broken: for the envelope
// the event's action names, the one its facts found.
func (c *checker) chainOf(id string) []*Envelope {
	if c.haveFacts && id == c.ev.Action.Envelope {
		return c.facts.chain
	}
	chain, _ := c.l.Chain(id)
	return chain
}

func (c *checker) isApproval() bool {
	return c.ev.Kind == event.KindAction && c.ev.Hold != nil
}

// human returns the acting actor if it is a human.
func (c *checker) human() *Violation {
	if c.actor == nil || !c.actor.IsHuman() {
		return inconsistent(Forbidden, "%s is not a human; only humans may do this", c.ev.Actor)
	}
	return nil
}

// oversee checks that the acting actor (or by) oversees agent id: root or
// the agent's creator, a human. It returns the agent.
func (l *Ledger) oversee(by, id string) (*Actor, *Violation) {
	b, ok := l.Actors[by]
	if !ok || !b.IsHuman() {
		return nil, inconsistent(Forbidden, "%s is not a human: only a human (root or the agent's creator) may do this", by)
	}
	a, ok := l.Actors[id]
	switch {
	case !ok:
		return nil, noActor(NotFound, id)
	case a.IsHuman():
		return nil, inconsistent(Forbidden, "%s is a human: execution control applies to agents (Axiom 4.1)", id)
	case by != RootID && a.Creator != by:
		return nil, refuse(Forbidden, "only root or %s's creator oversees it", id)
	}
	return a, nil
}

// agent returns the agent with this id.
func (l *Ledger) agent(id string) (*Actor, *Violation) {
	a, ok := l.Actors[id]
	switch {
	case !ok:
		return nil, noActor(NotFound, id)
	case a.IsHuman():
		return nil, inconsistent(Invalid, "%s is a human, not an agent", id)
	}
	return a, nil
}

// EffectiveRing is the agent's ring at time at in session sess: its base
// ring, or the most privileged unexpired elevation for that session or for
// all sessions (§8.6 get_effective_ring), and the elevation that gave it.
func (l *Ledger) EffectiveRing(a *Actor, sess string, at event.Instant) (ring.Ring, *Elevation) {
	eff := a.BaseRing()
	var used *Elevation
	for _, id := range l.elevationsOf[a.ID] {
		v := l.Elevations[id]
		if v.Ended == "" && (v.Session == "" || v.Session == sess) && !v.Expires.ReachedBy(at) && ring.Ring(v.Ring).MorePrivilegedThan(eff) {
			eff, used = ring.Ring(v.Ring), v
		}
	}
	return eff, used
}
