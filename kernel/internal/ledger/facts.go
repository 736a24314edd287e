package ledger

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/ring"
)

// actionFacts are what the gates of an action (or a hold request) share,
// computed once before they run, from the event and the ledger only: no
// gate leaves a fact behind for a later one.
type actionFacts struct {
	actor *Actor // nil if the actor does not exist (the actor gate says so)
	// query is the action's type and target, as grants match them.
	query grantQuery
	// chain is the envelope acted under and its ancestors; chainErr says
	// why there is none when the action names one.
	chain    []*Envelope
	chainErr *Violation
	// session is the action's session, nil when it names none or one that
	// does not exist.
	session *Session
	// eff is the agent's effective ring, never above any agent that
	// delegated its envelope (§8.8), and elevation the one it uses; own is
	// its effective ring before its delegators bound it (EffectiveRing).
	eff, own  ring.Ring
	elevation *Elevation
	// required is the ring the action needs (§5.2) and names what policies
	// match it by: its type, its target and the descriptors that apply;
	// nil when no policy binds the action (anyPolicies), which then has
	// nothing to match.
	required ring.Ring
	names    []string
	// cost is what the action costs (Def. 4.17) from the exact logged
	// payload; for an approval, what its hold reserved.
	cost uint64
	// execute is an execute's payload as the rules read it; payloadErr
	// says why it breaks §5.6 (or the form of an intent or result).
	execute    executePayload
	payloadErr error
}

// actionFacts computes the facts of c's action once. They live in the
// checker, so that a check allocates them with it.
func (c *checker) actionFacts() *actionFacts {
	f := &c.facts
	if c.haveFacts {
		return f
	}
	c.haveFacts = true
	l, ev := c.l, c.ev
	*f = actionFacts{actor: l.Actors[ev.Actor], eff: ring.Sandbox, query: newGrantQuery(ev.Action.Type, ev.Action.Target)}
	if id := ev.Action.Envelope; id != "" {
		f.chain, f.chainErr = l.Chain(id)
	}
	if s, ok := l.Sessions[ev.Session]; ok {
		f.session = s
	}
	if f.actor != nil && !f.actor.IsHuman() {
		f.eff, f.elevation = l.EffectiveRing(f.actor, ev.Session, c.at)
		f.own = f.eff
		for _, v := range f.chain[min(1, len(f.chain)):] {
			if h := l.Actors[v.Holder]; h != nil && !h.IsHuman() {
				if parent, _ := l.EffectiveRing(h, ev.Session, c.at); f.eff.MorePrivilegedThan(parent) {
					f.eff = ring.ChildRing(parent, f.eff)
				}
			}
		}
	}
	f.required, f.names = l.classify(f.query, anyPolicies(f.actor, f.chain))
	f.cost = l.Energy.Costs.Quote(ev.Action.Type, 0)
	if ev.Action.Type == event.Execute {
		f.execute, f.payloadErr = parseExecute(ev.Action.Payload, l.Rules)
		f.cost = f.execute.cost(l.Energy.Costs)
	}
	if c.isApproval() {
		if h, ok := l.Holds[ev.Hold.ID]; ok {
			f.cost = h.Reserved
		}
	}
	return f
}

// DefaultRequiredRing classifies an action no descriptor covers (§5.2 with
// Annal's defaults): observe is read-only (Ring 3); create, mutate and
// execute are reversible, because the log keeps every content id they
// replace (Ring 2). A descriptor with reversibility NONE makes its targets
// need Ring 1.
func DefaultRequiredRing(t event.ActionType) ring.Ring {
	if t == event.Observe {
		return ring.Sandbox
	}
	return ring.Standard
}

// Classify derives the ring an action requires (§5.2): the most privileged
// ring of every registered descriptor that applies to it, or the default
// for its type. It returns the names policies match the action by: its
// type, its target and those descriptors' ids.
func (l *Ledger) Classify(t event.ActionType, target string) (ring.Ring, []string) {
	return l.classify(newGrantQuery(t, target), true)
}

// classify is Classify of q, with the names only if withNames.
func (l *Ledger) classify(q grantQuery, withNames bool) (ring.Ring, []string) {
	required := DefaultRequiredRing(q.t)
	var names []string
	if withNames {
		names = append(make([]string, 0, 4), string(q.t), q.target) // room for the few descriptors that apply
	}
	for _, id := range l.descriptorIDs {
		d := l.Descriptors[id]
		if !q.allowedByCompiled(d.appliesTo, d.AppliesTo) {
			continue
		}
		if withNames {
			names = append(names, id)
		}
		if r := d.Descriptor.RequiredRing(); r.MorePrivilegedThan(required) {
			required = r
		}
	}
	return required, names
}

// anyPolicies says whether a policy binds an action of actor under chain
// (checkPolicy): one attached to the agent or to an envelope of its chain.
func anyPolicies(actor *Actor, chain []*Envelope) bool {
	if actor == nil || actor.IsHuman() {
		return false
	}
	if len(actor.Policies) > 0 {
		return true
	}
	for _, v := range chain {
		if len(v.Policies) > 0 {
			return true
		}
	}
	return false
}

// MaxOutputBytes bounds an execute payload's output_bytes, so that a cost
// always fits the ledger's integers.
const MaxOutputBytes = 1 << 40

// recordFields checks the members of an execute record (§5.6) —
// input_oid, output_oid and artifact_hash "sha256:<64 hex>", exit_code an
// integer of 32 bits, output_bytes (optional) an integer from 0 to
// MaxOutputBytes — and returns its output_bytes, which the cost depends on.
// Members are looked up by their exact names in the canonical payload the
// event carries, so the figure charged is the figure logged.
func recordFields(p map[string]json.RawMessage) (uint64, error) {
	for _, f := range []string{"input_oid", "output_oid", "artifact_hash"} {
		var oid string
		if raw, ok := p[f]; !ok || json.Unmarshal(raw, &oid) != nil || !event.ValidOID(oid) {
			return 0, fmt.Errorf("execute payload: %s must be \"sha256:<64 lower-case hex>\"", f)
		}
	}
	var code float64
	if raw, ok := p["exit_code"]; !ok || json.Unmarshal(raw, &code) != nil || code != math.Trunc(code) || code < math.MinInt32 || code > math.MaxInt32 {
		return 0, fmt.Errorf("execute payload: exit_code must be an integer of 32 bits")
	}
	raw, ok := p["output_bytes"]
	if !ok {
		return 0, nil
	}
	var n float64
	if json.Unmarshal(raw, &n) != nil || n != math.Trunc(n) || n < 0 || n > MaxOutputBytes {
		return 0, fmt.Errorf("execute payload: output_bytes must be an integer from 0 to 2^40")
	}
	return uint64(n), nil
}
