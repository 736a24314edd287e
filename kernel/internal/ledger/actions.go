package ledger

import (
	"fmt"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/capability"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/session"
)

// The gates of an action, in their order (ActionGateOrder is read from
// here). A hold request passes the same gates: it is the action, waiting
// for a human.
var actionGates = []gate{
	newGate(GateActor, checkActionActor),
	rateLimitGate,
	newGate(GateBoundary, checkBoundary),
	newGate(GateEnvelope, checkEnvelope),
	newGate(GateQuarantine, checkActionQuarantine),
	newGate(GateSession, checkActionSession),
	newGate(GateRing, checkRing),
	newGate(GateResources, checkResources),
	newGate(GatePolicy, checkPolicy),
	newGate(GateHold, checkHold),
	newGate(GateEnergy, checkActionEnergy),
	newGate(GatePayload, checkPayload),
}

// action: an action that passed every gate, committed with its cost; or
// an approved hold's action, committed with what the hold reserved.
var actionRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.read(ClaimRules)
		c.chain(ev.Action.Envelope)
		if ev.Hold != nil {
			c.write("hold/" + ev.Hold.ID)
			c.read(actorKey(ev.Hold.AnsweredBy)) // the human who approves: standing, authority, keys
		}
	},
	gates:       actionGates,
	actionFacts: true,
	draw: func(l *Ledger, ev *event.Event) Draw {
		if ev.Hold != nil {
			return Draw{} // reserved in the ledger since the hold was requested
		}
		return actionDraw(ev, ev.Decision.Settled, l)
	},
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		a := l.Actors[ev.Actor]
		chain, _ := l.Chain(ev.Action.Envelope)
		amount, release := ev.Decision.Settled, uint64(0)
		if ev.Hold != nil {
			h := l.Holds[ev.Hold.ID]
			release = h.Reserved
			h.Status, h.AnsweredBy, h.AnsweredAt, h.Settled, h.Reason = HoldApproved, ev.Hold.AnsweredBy, index, amount, ev.Hold.Reason
			l.pendingHolds[h.Envelope]--
			l.touchHold(h)
		}
		l.settle(a, chain, amount, release)
		l.openIntent(index, ev)
	},
}

// hold.requested: an action that matched a hold rule, its cost reserved
// until a human answers (Def. 4.20).
var holdRequestedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.read(ClaimRules)
		c.chain(ev.Action.Envelope)
		c.write("holds-of/" + ev.Hold.Envelope) // pending holds per envelope are bounded: counted one by one
		c.write("hold/" + ev.Hold.ID)
	},
	gates:       actionGates,
	actionFacts: true,
	draw: func(l *Ledger, ev *event.Event) Draw {
		return actionDraw(ev, ev.Hold.Reserved, l)
	},
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		a := l.Actors[ev.Actor]
		hr := ev.Hold
		chain, _ := l.Chain(hr.Envelope)
		a.Reserved += hr.Reserved
		l.touchActor(a)
		for _, v := range chain {
			v.Reserved += hr.Reserved
			l.touchEnvelope(v)
		}
		h := &Hold{ID: hr.ID, Actor: a.ID, Envelope: hr.Envelope, Session: ev.Session, Action: *ev.Action, Reserved: hr.Reserved,
			Deadline: hr.Deadline, RequestedAt: index, Status: HoldPending}
		l.pendingHolds[h.Envelope]++
		l.Holds[h.ID] = h
		l.touchHold(h)
	},
}

// action.denied: a record of an action a gate refused, at no cost. It
// changes nothing but the count: its actor need not be able to act.
var deniedRule = &rule{
	byRecord: true,
	gates:    []gate{actorGate},
	apply:    func(l *Ledger, _ uint64, _ *event.Event) { l.Denials++ },
}

func actionDraw(ev *event.Event, amount uint64, l *Ledger) Draw {
	return Draw{Actor: ev.Actor, Amount: amount, Envelopes: l.chainIDsOf(ev.Action.Envelope)}
}

// checkActionActor: the actor may act; for an approval, the hold is
// pending, is this action's, and its answerer may answer it.
func checkActionActor(c *checker) *Violation {
	if v := checkActor(c); v != nil {
		return v
	}
	if !c.isApproval() {
		return nil
	}
	h, ok := c.l.Holds[c.ev.Hold.ID]
	switch {
	case c.ev.Kind != event.KindAction:
		return inconsistent(Invalid, "only an action commits a hold")
	case !ok:
		return inconsistent(NotFound, "hold %s does not exist", c.ev.Hold.ID)
	case h.Status != HoldPending:
		return inconsistent(Conflict, "hold %s is already %s", h.ID, h.Status)
	case h.Actor != c.actor.ID || h.Envelope != c.ev.Action.Envelope || h.Session != c.ev.Session || !sameAction(&h.Action, c.ev.Action):
		return inconsistent(Invalid, "the action does not match hold %s", h.ID)
	}
	return c.l.MayAnswer(c.ev.Hold.AnsweredBy, h, c.at)
}

func sameAction(a, b *event.Action) bool {
	return a.Type == b.Type && a.Target == b.Target && string(a.Payload) == string(b.Payload) && a.PayloadHash == b.PayloadHash &&
		a.Envelope == b.Envelope && fmt.Sprint(a.Resources) == fmt.Sprint(b.Resources)
}

// checkBoundary: a state-changing action lies within the actor's writable
// targets W(p), and system/ and ledger/ are root's alone (Def. 4.11–4.12).
// Observe is a recorded claim and needs no grant.
func checkBoundary(c *checker) *Violation {
	t, target := c.ev.Action.Type, c.ev.Action.Target
	if t == event.Observe {
		return nil
	}
	if capability.IsPrivileged(target) && c.actor.ID != RootID {
		return refuse(Forbidden, "%s is a privileged target: only root writes system/ and ledger/ (Def. 4.12)", target)
	}
	if !c.grantQuery().allowedByCompiled(c.actor.grants, c.actor.Grants) && !c.l.OwnTree(c.actor.ID, target) {
		return refuse(Forbidden, "%s on %s is outside %s's writable targets (Axiom 4.3: default deny)", t, target, c.actor.ID)
	}
	return nil
}

// checkEnvelope: an agent's create, mutate and execute run under a live
// envelope it holds that grants them; the envelope's delegators must
// still be able to act (Def. 4.13).
func checkEnvelope(c *checker) *Violation {
	f := c.actionFacts()
	t, target := c.ev.Action.Type, c.ev.Action.Target
	if c.ev.Action.Envelope == "" {
		if t != event.Observe && !c.actor.IsHuman() {
			return refuse(Forbidden, "agent %s holds no live envelope that grants %s on %s", c.actor.ID, t, target)
		}
		return nil
	}
	if f.chainErr != nil {
		return f.chainErr
	}
	if f.chain[0].Holder != c.actor.ID {
		return inconsistent(Forbidden, "actor %s acted under envelope %s, held by %s", c.actor.ID, f.chain[0].ID, f.chain[0].Holder)
	}
	if v := c.l.LiveChain(f.chain, c.at); v != nil {
		return v
	}
	if !f.query.allowedByCompiled(f.chain[0].grants, f.chain[0].Grants) && !c.l.OwnTree(c.actor.ID, target) {
		return refuse(Forbidden, "envelope %s does not grant %s on %s", f.chain[0].ID, t, target)
	}
	return nil
}

// checkActionQuarantine: neither the agent nor any agent that delegated its
// envelope is quarantined in the action's session or in all (§13). Annal
// enforces quarantine; the reference implementation only recorded it.
func checkActionQuarantine(c *checker) *Violation {
	if c.actor.IsHuman() {
		return nil
	}
	sess := c.ev.Session
	if q := c.l.Quarantined(c.actor.ID, sess, c.at); q != nil {
		return inQuarantine(c.actor.ID, q)
	}
	f := c.actionFacts()
	for _, v := range f.chain[min(1, len(f.chain)):] {
		if q := c.l.Quarantined(v.Holder, sess, c.at); q != nil {
			return refuse(Forbidden, "envelope %s was delegated by %s, who is quarantined (%s) until %s", f.chain[0].ID, v.Holder, q.Reason, q.ExpiresAt)
		}
	}
	return nil
}

// checkActionSession: an action in a session needs the session ACTIVE and
// the actor an active participant (or its creator, or root); a target
// under sessions/ is checked against the session's isolation (§10–§11).
func checkActionSession(c *checker) *Violation {
	if v := sessionStanding(c.actor.ID, c.ev.Session, c.actionFacts().session, actionWork); v != nil {
		return v
	}
	return c.sessionPath(c.ev.Action.Target, c.ev.Action.Type != event.Observe)
}

// sessionPath checks one path of the target namespace: a path under
// sessions/ is open to an agent only inside its own session, or, to read,
// a session granted to it under READ_COMMITTED. Without a session there is
// no isolation scope, and every session path is denied (§11.4). Humans
// overseeing sessions may read and write them all. p is clean: an absolute
// p is taken as the same path below the namespace root.
func (c *checker) sessionPath(p string, write bool) *Violation {
	if c.actor.IsHuman() {
		return nil
	}
	if p = strings.TrimPrefix(p, "/"); p == "" {
		return refuse(Forbidden, "path %q is the namespace root, which holds every session's folder: an agent names a path below it (§11.3)", "/")
	}
	if p != session.SessionsRoot && !strings.HasPrefix(p, session.SessionsRoot+"/") {
		return nil
	}
	var scope *session.Scope
	if se := c.actionFacts().session; se != nil {
		// se.Scope(), without its copy of the grants: IsPathAllowed only
		// reads them.
		scope = &session.Scope{Session: se.ID, Isolation: se.Config.Isolation, Granted: se.Grants}
	}
	if err := session.IsPathAllowed(scope, p, write); err != nil {
		return refuse(Forbidden, "%v", err)
	}
	if write {
		return c.sessionWrite(p)
	}
	return nil
}

// checkRing: an agent's effective ring meets the ring the action requires
// (§6). Humans stand outside the rings.
func checkRing(c *checker) *Violation {
	if c.actor.IsHuman() {
		return nil
	}
	f := c.actionFacts()
	if res := ring.Check(f.eff, f.required, ring.Score(c.actor.TrustBP)); !res.Allowed {
		hint := ""
		if f.elevation == nil && f.required != ring.Root {
			hint = "; a human may assign a trust score (annal rings assign) or grant an elevation (annal elevate)"
		}
		return refuse(Forbidden, "%s on %s needs %s, agent %s is at %s: %s%s", c.ev.Action.Type, c.ev.Action.Target, f.required, c.actor.ID, f.eff, res.Reason, hint)
	}
	return nil
}

// checkResources: what the action declares it uses fits its ring's
// constraints (§7), and its declared paths the session's isolation.
func checkResources(c *checker) *Violation {
	r := c.ev.Action.Resources
	if r == nil || c.actor.IsHuman() {
		return nil
	}
	f := c.actionFacts()
	own := append(make([]string, 0, 2), "agents/"+c.actor.ID)
	if s := f.session; s != nil && s.workDir != "" {
		own = append(own, s.workDir)
	} else if c.ev.Session != "" {
		own = append(own, session.WorkDir(c.ev.Session))
	}
	use := ring.Use{Network: r.Network, FilesystemRead: r.FilesystemRead, FilesystemWrite: r.FilesystemWrite, Subprocess: r.Subprocess, Tools: int(r.Tools)}
	if denied := c.l.constraintsFor(f.eff).CheckUse(use, own); len(denied) > 0 {
		var why []string
		for _, d := range denied {
			why = append(why, fmt.Sprintf("%s %s: %s", d.Resource, d.Target, d.Reason))
		}
		return refuse(Forbidden, "agent %s at %s: %s (§7.2)", c.actor.ID, f.eff, strings.Join(why, "; "))
	}
	for _, p := range r.FilesystemRead {
		if v := c.sessionPath(p, false); v != nil {
			return v
		}
	}
	for _, p := range r.FilesystemWrite {
		if v := c.sessionPath(p, true); v != nil {
			return v
		}
	}
	return nil
}

// ConstraintsFor is the resource constraints of ring r (§7.2), with the
// Ring 2 network allowlist root configured.
func (l *Ledger) ConstraintsFor(r ring.Ring) ring.Constraints {
	c := l.constraintsFor(r)
	if r == ring.Standard {
		c.NetworkAllowlist = append([]string(nil), c.NetworkAllowlist...)
	}
	return c
}

// defaultConstraints is ring.DefaultConstraints, built once: the
// constraints are values, and constraintsFor replaces the one slice.
var defaultConstraints = ring.DefaultConstraints()

// constraintsFor is ConstraintsFor whose allowlist is the ledger's own, for
// the gates, which only read it.
func (l *Ledger) constraintsFor(r ring.Ring) ring.Constraints {
	c := ring.ConstraintsFor(defaultConstraints, r)
	if r == ring.Standard {
		c.NetworkAllowlist = l.RingConfig.NetworkAllowlist
	}
	return c
}

// checkPolicy: every policy attached to the agent or to an envelope of its
// chain; the first violation denies (fail closed on a policy that is not
// defined).
func checkPolicy(c *checker) *Violation {
	if c.actor.IsHuman() {
		return nil
	}
	f := c.actionFacts()
	if !anyPolicies(c.actor, f.chain) {
		return nil
	}
	var buf [8]*policy.Compiled // an agent is bound by a few policies: no allocation for them
	compiled, v := c.l.compiledPolicies(c.actor.Policies, buf[:0])
	for _, e := range f.chain {
		if v == nil {
			compiled, v = c.l.compiledPolicies(e.Policies, compiled)
		}
	}
	if v != nil {
		return v
	}
	var pv *policy.Violation
	if payload, known := c.payload(); known {
		pv = policy.Evaluate(compiled, f.names, payload)
	} else {
		pv = policy.EvaluateNames(compiled, f.names) // a payload not known is not judged: see sealed.go
	}
	if pv != nil {
		v := refuse(Forbidden, "%v", pv)
		if p := c.l.Policies[pv.Policy]; p != nil && p.SignalOnViolation {
			v.Policy = pv.Policy
		}
		return v
	}
	return nil
}

// compiledPolicies appends the compiled policies named to compiled, or
// says which one is not defined (a policy gate fails closed).
func (l *Ledger) compiledPolicies(names []string, compiled []*policy.Compiled) ([]*policy.Compiled, *Violation) {
	for _, name := range names {
		p, ok := l.compiled[name]
		if !ok {
			return compiled, undefinedPolicy(name)
		}
		compiled = append(compiled, p)
	}
	return compiled, nil
}

// MayEver says why actor could never be allowed t on target — outside its
// writable targets, a privileged target, or an action its own policies block
// by name (a blocked action, a tool not allowed) — or nil if some envelope, budget and ring could allow it. What
// depends on the moment (envelopes, energy, ring, rate, holds) and on the
// payload (policy patterns) is left to the gates.
//
// With observeNeedsGrant an observe also needs a grant: an MCP gate's
// read-only tool is shown only to an agent granted observe on it.
func (l *Ledger) MayEver(actorID string, t event.ActionType, target string, observeNeedsGrant bool) *Violation {
	a, ok := l.Actors[actorID]
	if !ok {
		return noActor(NotFound, actorID)
	}
	c := &checker{l: l, ev: &event.Event{Kind: event.KindAction, Actor: actorID, Action: &event.Action{Type: t, Target: target}}, actor: a}
	v := checkBoundary(c)
	if v == nil && observeNeedsGrant && t == event.Observe && !a.IsHuman() && !Allows(a.Grants, target, t) {
		v = refuse(Forbidden, "observe on %s is outside %s's grants", target, a.ID)
	}
	if v != nil {
		return v.at(GateBoundary)
	}
	return l.blockedByOwnPolicies(a, t, target)
}

// blockedByOwnPolicies says which policy of agent a's own blocks t on
// target whatever the payload — a blocked action, a tool not allowed, or a
// policy not defined (fail closed) — or nil if none does.
func (l *Ledger) blockedByOwnPolicies(a *Actor, t event.ActionType, target string) *Violation {
	if a.IsHuman() || len(a.Policies) == 0 {
		return nil
	}
	_, names := l.Classify(t, target)
	for _, name := range a.Policies {
		p, ok := l.compiled[name]
		if !ok {
			return undefinedPolicy(name).at(GatePolicy)
		}
		if pv := p.Check(names, nil); pv != nil && (pv.Rule == policy.RuleBlockedAction || pv.Rule == policy.RuleToolNotAllowed) {
			return refuse(Forbidden, "%v", pv).at(GatePolicy)
		}
	}
	return nil
}

// MustHold reports whether an action of type t on target under chain waits
// for a human: a hold rule of the envelope or of an ancestor matches it
// (Def. 4.19–4.20).
func MustHold(chain []*Envelope, t event.ActionType, target string) bool {
	return mustHold(chain, newGrantQuery(t, target))
}

func mustHold(chain []*Envelope, q grantQuery) bool {
	for _, v := range chain {
		if q.allowedByCompiled(v.holdOn, v.HoldOn) {
			return true
		}
	}
	return false
}

// HoldDeadline is when a hold requested at `at` under chain times out: the
// shortest hold timeout of the chain, or never (zero).
func HoldDeadline(chain []*Envelope, at event.Instant) event.Instant {
	var secs uint64
	for _, v := range chain {
		if v.HoldTimeoutSecs > 0 && (secs == 0 || v.HoldTimeoutSecs < secs) {
			secs = v.HoldTimeoutSecs
		}
	}
	if secs == 0 {
		return event.Instant{}
	}
	return at.Add(time.Duration(secs) * time.Second)
}

// checkHold: an action a hold rule matches is held, not committed; a hold
// request is an action a hold rule matches, with the deadline its chain
// gives and room among its envelope's pending holds.
func checkHold(c *checker) *Violation {
	f := c.actionFacts()
	match := mustHold(f.chain, f.query)
	if c.ev.Kind == event.KindAction {
		if match && !c.isApproval() {
			return refuse(Forbidden, "%s on %s matches a hold rule of envelope %s: it waits for a human (Def. 4.20)", c.ev.Action.Type, c.ev.Action.Target, f.chain[0].ID)
		}
		return nil
	}
	hr := c.ev.Hold
	switch {
	case hr.Envelope != c.ev.Action.Envelope:
		return inconsistent(Invalid, "hold %s names envelope %s, its action %s", hr.ID, hr.Envelope, c.ev.Action.Envelope)
	case c.l.Holds[hr.ID] != nil:
		return inconsistent(Conflict, "hold %s already exists", hr.ID)
	case !match:
		return refuse(Invalid, "hold %s: no hold rule of envelope %s matches %s on %s", hr.ID, hr.Envelope, c.ev.Action.Type, c.ev.Action.Target)
	case !hr.Deadline.Equal(HoldDeadline(f.chain, c.at).Time):
		return refuse(Invalid, "hold %s has deadline %q; its envelopes' hold timeout gives %q", hr.ID, hr.Deadline, HoldDeadline(f.chain, c.at))
	case c.opts.MaxPendingHolds > 0 && c.l.pendingHolds[hr.Envelope] >= c.opts.MaxPendingHolds:
		return refuse(Forbidden, "envelope %s already has %d pending holds, the most allowed", hr.Envelope, c.opts.MaxPendingHolds)
	}
	return nil
}

// checkActionEnergy: the decision records the action's cost as the logged
// payload gives it, and the actor and every envelope of the chain can pay
// it (INV-5, Def. 4.18).
func checkActionEnergy(c *checker) *Violation {
	f := c.actionFacts()
	amount, release := f.cost, uint64(0)
	if c.ev.Kind == event.KindHoldRequested {
		if c.ev.Hold.Reserved != f.cost {
			return refuse(Invalid, "hold %s reserves %d; %s costs %d", c.ev.Hold.ID, c.ev.Hold.Reserved, c.ev.Action.Type, f.cost)
		}
		return c.canSpend(f.chain, amount, 0)
	}
	d := c.ev.Decision
	if c.isApproval() {
		release = f.cost
		if d.Settled != f.cost {
			return inconsistent(Invalid, "approved hold %s reserved %d but settles %d", c.ev.Hold.ID, f.cost, d.Settled)
		}
	}
	if d.Cost != f.cost || d.Reserved != f.cost || d.Settled != f.cost {
		if v := c.canSpend(f.chain, d.Settled, release); v != nil {
			return v
		}
		return refuse(Invalid, "the decision records cost %d, reserved %d, settled %d; %s of this payload costs %d (Def. 4.17)", d.Cost, d.Reserved, d.Settled, c.ev.Action.Type, f.cost)
	}
	return c.canSpend(f.chain, amount, release)
}

// canSpend checks that the actor and every envelope of chain can settle
// amount, release first returned from their reservations, less what events
// in flight hold.
func (c *checker) canSpend(chain []*Envelope, amount, release uint64) *Violation {
	a, what := c.actor, "settling"
	if c.ev.Action != nil {
		what = string(c.ev.Action.Type)
	}
	if a.Reserved < release || a.Balance < amount || a.Balance-amount < a.Reserved-release {
		return inconsistent(NoEnergy, "actor %s cannot settle %d (balance %d, reserved %d)", a.ID, amount, a.Balance, a.Reserved)
	}
	if need := amount - min(amount, release); need > 0 {
		if have := c.available(a); need > have {
			return inconsistent(NoEnergy, "%s costs %d, actor %s has %d available", what, amount, a.ID, have)
		}
	}
	for _, v := range chain {
		if v.Reserved < release || v.Consumed+amount+v.Reserved-release > v.Budget {
			return inconsistent(NoEnergy, "envelope %s cannot settle %d (budget %d, consumed %d, reserved %d)", v.ID, amount, v.Budget, v.Consumed, v.Reserved)
		}
		if need := amount - min(amount, release); need > 0 {
			if have := c.remaining(v); need > have {
				return inconsistent(NoEnergy, "%s costs %d, envelope %s has %d of its budget %d left", what, amount, v.ID, have, v.Budget)
			}
		}
	}
	return nil
}

// settle moves amount from balance to consumed on the actor and every
// envelope of chain, returning release from their reservations first.
func (l *Ledger) settle(a *Actor, chain []*Envelope, amount, release uint64) {
	a.Reserved -= release
	a.Balance -= amount
	a.Consumed += amount
	l.touchActor(a)
	for _, v := range chain {
		v.Reserved -= release
		v.Consumed += amount
		l.touchEnvelope(v)
	}
}

// checkPayload: an execute action carries §5.6's fields, or is an intent
// or a result (RulesIntents). A result is never held: its intent was.
func checkPayload(c *checker) *Violation {
	if c.ev.Action.Type != event.Execute {
		return nil
	}
	f := c.actionFacts()
	if f.payloadErr != nil {
		return refuse(Invalid, "%v", f.payloadErr)
	}
	if f.execute.result && (c.ev.Kind != event.KindAction || c.ev.Hold != nil) {
		return inconsistent(Invalid, "an execute result is recorded on its own, never held: its intent was decided")
	}
	return nil
}

// HoldRule names the hold rule of chain that holds t on target: the
// envelope whose hold_on grant matches and that grant's pattern, or "" when
// none does.
func HoldRule(chain []*Envelope, t event.ActionType, target string) (envelope, pattern string) {
	for _, v := range chain {
		for _, g := range v.HoldOn {
			if Allows([]event.Grant{g}, target, t) {
				return v.ID, g.Pattern
			}
		}
	}
	return "", ""
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindAction] = actionRule
	rules[event.KindHoldRequested] = holdRequestedRule
	rules[event.KindActionDenied] = deniedRule
}
