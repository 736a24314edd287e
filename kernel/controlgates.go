package kernel

import (
	"fmt"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/session"
)

// The execution-control gates of the validate stage. With the gates of
// errors.go, an agent's action passes, in this order:
//
//	actor → form → rate_limit → boundary → envelope → quarantine →
//	session → ring → resources → policy → hold, then energy (reserve)
//
// and any gate that fails denies (fail closed). The rate limit comes
// first among them so that a flooding agent costs the kernel least; its
// denials are not written to the log (that would let an agent fill the
// log with the very requests the limit refuses), all others are.
const (
	GateRateLimit  = "rate_limit" // token bucket per agent and ring (§9)
	GateQuarantine = "quarantine" // the agent, or a delegator of its envelope, is quarantined (§13)
	GateSession    = "session"    // session state, participation, path isolation (§10–§11)
	GateRing       = "ring"       // effective ring against the action's required ring (§4–§6, §8)
	GateResources  = "resources"  // the ring's resource constraints (§7)
	GatePolicy     = "policy"     // attached policies: blocked actions and payload patterns (Agent OS)
)

// SessionsRoot is the folder of session working directories in the target
// namespace: session s works in sessions/<s> (§11.2).
const SessionsRoot = "sessions"

// defaultRequiredRing classifies an action no descriptor covers (§5.2 with
// Annal's defaults): observe is read-only (Ring 3); create, mutate and
// execute are reversible, because the log keeps every content id they
// replace (Ring 2). Register a descriptor with reversibility NONE for
// targets whose effects the log cannot undo (payments, mail, deployments):
// they then need Ring 1.
func defaultRequiredRing(t event.ActionType) ring.Ring {
	if t == event.Observe {
		return ring.Sandbox
	}
	return ring.Standard
}

// effectiveRing is the agent's ring now: its base ring, or the ring of an
// unexpired elevation for this session or for all sessions (§8.6
// get_effective_ring). The caller holds k.mu.
func (k *Kernel) effectiveRing(a *Actor, sess string, now time.Time) (ring.Ring, *ledger.Elevation) {
	eff := a.BaseRing()
	var used *ledger.Elevation
	for _, v := range k.ledger.ElevationsOf(a.ID) {
		if (v.Session == "" || v.Session == sess) && !expiredAt(v.Expires, now) && ring.Ring(v.Ring).MorePrivilegedThan(eff) {
			eff, used = ring.Ring(v.Ring), v
		}
	}
	return eff, used
}

// quarantined reports whether the agent is quarantined in sess (or in all
// sessions) at now. The caller holds k.mu.
func (k *Kernel) quarantined(agent, sess string, now time.Time) *ledger.Quarantine {
	for _, key := range []string{ledger.QuarantineKey(agent, ""), ledger.QuarantineKey(agent, sess)} {
		if q, ok := k.ledger.Quarantines[key]; ok && q.Ended == "" && !expiredAt(q.ExpiresAt, now) {
			return q
		}
		if sess == "" {
			break
		}
	}
	return nil
}

// rateLimit: an agent's actions draw from its token bucket (§9).
func (s *submission) rateLimit() error {
	if s.resume != nil {
		return nil // a hold's approval is the human's act, not the agent's request
	}
	return s.k.drawToken(StageValidate, s.actor, s.req.Session, s.now)
}

// drawToken takes one token from an agent's bucket, at its effective ring
// in sess: every request an agent makes that writes to the log (actions,
// deltas, saga reports, joins, its own elevations and signal masks) draws
// from the same bucket. Humans are not limited. The caller holds k.mu.
func (k *Kernel) drawToken(stage string, a *Actor, sess string, now time.Time) error {
	if a.IsHuman() || k.limiter == nil {
		return nil
	}
	eff, _ := k.effectiveRing(a, sess, now)
	if err := k.limiter.Allow(a.ID, eff); err != nil {
		return denyAt(stage, GateRateLimit, ErrRateLimited, "%v", err)
	}
	return nil
}

// controlGates runs the quarantine, session, ring, resources and policy
// gates for an agent (humans stand outside the rings).
func (s *submission) controlGates() error {
	k, a := s.k, s.actor
	t, target, sess := s.action.Type, s.action.Target, s.req.Session
	if a.IsHuman() {
		return s.sessionGate()
	}
	// Quarantine (§13), enforced: the agent itself, and every agent that
	// delegated the envelope it acts under.
	if q := k.quarantined(a.ID, sess, s.now); q != nil {
		return denyAt(StageValidate, GateQuarantine, ErrForbidden, "agent %s is quarantined (%s) until %s", a.ID, q.Reason, q.ExpiresAt)
	}
	for _, v := range s.chain[min(1, len(s.chain)):] {
		if q := k.quarantined(v.Holder, sess, s.now); q != nil {
			return denyAt(StageValidate, GateQuarantine, ErrForbidden, "envelope %s was delegated by %s, who is quarantined (%s) until %s", s.chain[0].ID, v.Holder, q.Reason, q.ExpiresAt)
		}
	}
	if err := s.sessionGate(); err != nil {
		return err
	}
	// Ring (§6): the effective ring, never above any delegator's (§8.8).
	eff, elev := k.effectiveRing(a, sess, s.now)
	for _, v := range s.chain[min(1, len(s.chain)):] {
		if h := k.ledger.Actors[v.Holder]; h != nil && !h.IsHuman() {
			if parent, _ := k.effectiveRing(h, sess, s.now); eff.MorePrivilegedThan(parent) {
				eff = ring.ChildRing(parent, eff)
			}
		}
	}
	required, names, err := k.classify(t, target, s.req.ActionID)
	if err != nil {
		return err
	}
	s.names = names
	if res := ring.Check(eff, required, ring.Score(a.TrustBP)); !res.Allowed {
		hint := ""
		if elev == nil && required != ring.Root {
			hint = "; a human may assign a trust score (annal rings assign) or grant an elevation (annal elevate)"
		}
		return denyAt(StageValidate, GateRing, ErrForbidden, "%s on %s needs %s, agent %s is at %s: %s%s", t, target, required, a.ID, eff, res.Reason, hint)
	}
	// Resources (§7).
	if r := s.action.Resources; r != nil {
		own := []string{"agents/" + a.ID}
		if sess != "" {
			own = append(own, session.WorkDir(sess))
		}
		use := ring.Use{Network: r.Network, FilesystemRead: r.FilesystemRead, FilesystemWrite: r.FilesystemWrite, Subprocess: r.Subprocess, Tools: int(r.Tools)}
		if denied := k.constraintsFor(eff).CheckUse(use, own); len(denied) > 0 {
			var why []string
			for _, d := range denied {
				why = append(why, fmt.Sprintf("%s %s: %s", d.Resource, d.Target, d.Reason))
			}
			return denyAt(StageValidate, GateResources, ErrForbidden, "agent %s at %s: %s (§7.2)", a.ID, eff, strings.Join(why, "; "))
		}
		for _, p := range r.FilesystemRead {
			if err := s.sessionPath(p, false); err != nil {
				return err
			}
		}
		for _, p := range r.FilesystemWrite {
			if err := s.sessionPath(p, true); err != nil {
				return err
			}
		}
	}
	return s.policyGate()
}

// sessionGate: an action in a session needs the session ACTIVE and the
// actor an active participant (or its creator, or root); a target under
// sessions/ is checked against the session's isolation (§11).
func (s *submission) sessionGate() error {
	k, a, sess := s.k, s.actor, s.req.Session
	if sess != "" {
		se, ok := k.ledger.Sessions[sess]
		if !ok {
			return denyAt(StageValidate, GateSession, ErrForbidden, "session %s does not exist", sess)
		}
		if !se.State.AcceptsActions() {
			return denyAt(StageValidate, GateSession, ErrForbidden, "session %s is %s; actions run only in an ACTIVE session (§10.1)", sess, se.State)
		}
		if !se.IsActiveParticipant(a.ID) && a.ID != se.Creator && a.ID != RootID {
			return denyAt(StageValidate, GateSession, ErrForbidden, "%s is not an active participant of session %s", a.ID, sess)
		}
	}
	return s.sessionPath(s.action.Target, s.action.Type != event.Observe)
}

// sessionPath checks one path of the target namespace: a path under
// sessions/ is allowed only inside the actor's own session, or, to read,
// a session granted to it under READ_COMMITTED. Without a session there
// is no isolation scope, and every session path is denied (§11.4).
// Humans overseeing sessions may read and write them all.
func (s *submission) sessionPath(p string, write bool) error {
	if p != SessionsRoot && !strings.HasPrefix(p, SessionsRoot+"/") || s.actor.IsHuman() {
		return nil
	}
	var scope *session.Scope
	if se, ok := s.k.ledger.Sessions[s.req.Session]; ok {
		scope = &session.Scope{Session: se.ID, Isolation: se.Config.Isolation, Granted: se.Grants}
	}
	if err := session.IsPathAllowed(scope, p, write); err != nil {
		return denyAt(StageValidate, GateSession, ErrForbidden, "%v", err)
	}
	return nil
}

// classify derives the ring an action requires (§5.2): the most privileged
// ring of every descriptor that applies to it, and of the one the request
// names, or the default for its type. It returns the names policies see.
// The caller holds k.mu.
func (k *Kernel) classify(t event.ActionType, target, named string) (ring.Ring, []string, error) {
	required := defaultRequiredRing(t)
	names := []string{string(t), target}
	if named != "" {
		d, ok := k.ledger.Descriptors[named]
		if !ok {
			return 0, nil, denyAt(StageValidate, GateRing, ErrForbidden, "action %s is not registered", named)
		}
		if !allows(d.AppliesTo, target, t) {
			return 0, nil, denyAt(StageValidate, GateRing, ErrForbidden, "action %s does not apply to %s on %s", named, t, target)
		}
	}
	for id, d := range k.ledger.Descriptors {
		if !allows(d.AppliesTo, target, t) {
			continue
		}
		names = append(names, id)
		if r := d.Descriptor.RequiredRing(); r.MorePrivilegedThan(required) {
			required = r
		}
	}
	return required, names, nil
}

// policyGate: every policy attached to the agent or to an envelope of its
// chain; the first violation denies.
func (s *submission) policyGate() error {
	k := s.k
	names := append([]string{}, s.actor.Policies...)
	for _, v := range s.chain {
		names = append(names, v.Policies...)
	}
	if len(names) == 0 {
		return nil
	}
	var compiled []*policy.Compiled
	for _, name := range names {
		c, err := k.compiledPolicy(name)
		if err != nil {
			return denyAt(StageValidate, GatePolicy, ErrForbidden, "policy %s: %v (fail closed)", name, err)
		}
		compiled = append(compiled, c)
	}
	payload := s.action.Payload
	if v := policy.Evaluate(compiled, s.names, payload); v != nil {
		if p := k.ledger.Policies[v.Policy]; p != nil && p.SignalOnViolation {
			s.policySignal = v.Policy
		}
		return denyAt(StageValidate, GatePolicy, ErrForbidden, "%v", v)
	}
	return nil
}

// compiledPolicy returns the compiled latest version of a policy. The
// caller holds k.mu.
func (k *Kernel) compiledPolicy(name string) (*policy.Compiled, error) {
	p, ok := k.ledger.Policies[name]
	if !ok {
		return nil, fmt.Errorf("not defined")
	}
	key := fmt.Sprintf("%s@%d", name, p.Version)
	if c, ok := k.policies[key]; ok {
		return c, nil
	}
	c, err := policy.Compile(p.Policy)
	if err != nil {
		return nil, err
	}
	if len(k.policies) > 1024 {
		clear(k.policies)
	}
	k.policies[key] = c
	return c, nil
}
