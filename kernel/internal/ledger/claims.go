package ledger

import (
	"slices"

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

// claimSet collects an event's claims, in buf while they fit: an event
// claims a few objects, and its claims then cost one allocation.
type claimSet struct {
	l   *Ledger
	cs  []Claim
	buf [8]Claim
}

func (c *claimSet) read(keys ...string) {
	for _, k := range keys {
		c.cs = append(c.cs, Claim{Key: k})
	}
}

func (c *claimSet) write(keys ...string) {
	for _, k := range keys {
		c.cs = append(c.cs, Claim{Key: k, Exclusive: true})
	}
}

// chain reads an envelope's chain and the agents that hold it.
func (c *claimSet) chain(id string) {
	if v, ok := c.l.Envelopes[id]; ok && v.chainClaims != nil {
		c.cs = append(c.cs, v.chainClaims...)
		return
	}
	if chain, v := c.l.Chain(id); v == nil {
		c.cs = appendChainClaims(c.cs, chain)
	}
}

// appendChainClaims appends the reads of chain's envelopes and of the
// agents that hold them.
func appendChainClaims(cs []Claim, chain []*Envelope) []Claim {
	for _, e := range chain {
		cs = append(cs, Claim{Key: e.stateKey()}, Claim{Key: actorKey(e.Holder)})
	}
	return cs
}

// session reads session id.
func (c *claimSet) session(id string) {
	if s, ok := c.l.Sessions[id]; ok && s.claimKey != "" {
		c.read(s.claimKey)
		return
	}
	c.read(sessionKey(id))
}

// actor reads actor id.
func (c *claimSet) actor(id string) {
	if a, ok := c.l.Actors[id]; ok {
		c.read(a.stateKey())
		return
	}
	c.read(actorKey(id))
}

// Claims returns what ev reads and changes, sorted by key, each key once
// (exclusive if ev both reads and changes it): its actor and session, read,
// and what the rule of its kind names. It reads the ledger only for what
// never changes once logged: an envelope's chain, a saga's session.
func (l *Ledger) Claims(ev *event.Event) []Claim {
	c := &claimSet{l: l}
	c.cs = c.buf[:0]
	if ev.Actor != event.KernelActor {
		c.actor(ev.Actor)
	}
	if ev.Session != "" {
		c.session(ev.Session)
	}
	if s := ev.Signed; s != nil {
		c.read(actorKey(s.By))
		c.write("nonce/" + nonceKey(s.By, s.Nonce))
	}
	if a := ev.Action; a != nil && a.Sealed != nil {
		c.read(subjectKey(a.Sealed.Subject)) // an erasure in flight decides first
	}
	if r := l.ruleFor(ev); r != nil && r.claims != nil {
		r.claims(c, ev)
	}
	return sortClaims(c.cs)
}

// sortClaims sorts cs by key, an exclusive claim before a shared one of
// the same key, and keeps the first of each key. Most events make a few
// claims, which an insertion sort orders quickest; a kill or a session's
// end may make many.
func sortClaims(cs []Claim) []Claim {
	if len(cs) > 16 {
		slices.SortFunc(cs, func(a, b Claim) int {
			switch {
			case claimBefore(a, b):
				return -1
			case claimBefore(b, a):
				return 1
			}
			return 0
		})
	}
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && claimBefore(cs[j], cs[j-1]); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
	n := min(len(cs), 1)
	for _, x := range cs[n:] {
		if x.Key != cs[n-1].Key {
			cs[n] = x
			n++
		}
	}
	clear(cs[n:]) // drop the strings the tail still holds
	return cs[:n]
}

// claimBefore says whether a sorts before b.
func claimBefore(a, b Claim) bool {
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	return a.Exclusive && !b.Exclusive
}
