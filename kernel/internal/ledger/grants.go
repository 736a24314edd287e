package ledger

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/capability"
)

// patterns caches parsed capability patterns: grants are checked on every
// action, several times, and a log names few distinct patterns. A lookup
// takes no lock (sync.Map), since every decision and fold on both cores
// makes several.
type patterns struct {
	m sync.Map // pattern string → capability.Pattern
	n atomic.Int64
}

const maxCachedPatterns = 4096

func (p *patterns) get(s string) (capability.Pattern, error) {
	if pat, ok := p.m.Load(s); ok {
		return pat.(capability.Pattern), nil
	}
	pat, err := capability.ParsePattern(s)
	if err != nil {
		return pat, err
	}
	if p.n.Add(1) > maxCachedPatterns {
		p.m.Clear()
		p.n.Store(1)
	}
	p.m.Store(s, pat)
	return pat, nil
}

var patternCache patterns

// ParsePattern parses a capability pattern through the cache the rules use.
func ParsePattern(s string) (capability.Pattern, error) { return patternCache.get(s) }

// Allows reports whether some grant lists t and matches target (Axiom 4.3:
// default deny).
func Allows(grants []event.Grant, target string, t event.ActionType) bool {
	if len(grants) == 0 {
		return false
	}
	return newGrantQuery(t, target).allowedBy(grants)
}

// grantQuery is one action's (type, target) as grants are matched against
// it, with the target validated once: a check matches one action against
// several grant lists (the actor's, its envelope's, hold rules,
// descriptors), and the target's validity is the same for each.
type grantQuery struct {
	t      event.ActionType
	bit    uint8 // actionBit(t)
	target string
	valid  bool // no pattern matches an invalid target
}

func newGrantQuery(t event.ActionType, target string) grantQuery {
	return grantQuery{t: t, bit: actionBit(t), target: target, valid: event.ValidateTarget(target) == nil}
}

// actionBit is the bit of an action type in a compiled grant's mask; 0 for
// a type outside the four, which a grant's list is searched for.
func actionBit(t event.ActionType) uint8 {
	switch t {
	case event.Observe:
		return 1 << 0
	case event.Create:
		return 1 << 1
	case event.Mutate:
		return 1 << 2
	case event.Execute:
		return 1 << 3
	}
	return 0
}

// compiledGrant is a grant with its pattern parsed.
type compiledGrant struct {
	actions []event.ActionType
	// mask has the actionBit of each type in actions: a check matches
	// several grant lists an action, each type compared as a string before.
	mask    uint8
	pattern capability.Pattern
	parsed  bool // a pattern that does not parse matches nothing
}

// grants reports whether g names the query's type.
func (g *compiledGrant) grants(q grantQuery) bool {
	if q.bit != 0 {
		return g.mask&q.bit != 0
	}
	return slices.Contains(g.actions, q.t)
}

// compiledGrants are the grants of an actor, an envelope or a descriptor,
// compiled when it enters the ledger (newActor, keepDerived, newDescriptor):
// they never change once logged, and matching them then looks up no
// pattern in the cache.
type compiledGrants []compiledGrant

func compileGrants(grants []event.Grant) compiledGrants {
	if len(grants) == 0 {
		return nil
	}
	out := make(compiledGrants, len(grants))
	for i, g := range grants {
		p, err := patternCache.get(g.Pattern)
		out[i] = compiledGrant{actions: g.Actions, pattern: p, parsed: err == nil}
		for _, t := range g.Actions {
			out[i].mask |= actionBit(t)
		}
	}
	return out
}

// allowedByCompiled is allowedBy(grants), matched against their compiled
// form: compiled, made from grants, or nil when they were not compiled (an
// object made outside the fold), and then the grants are matched as they
// are. In a test binary both ways are taken, and must agree.
func (q grantQuery) allowedByCompiled(compiled compiledGrants, grants []event.Grant) bool {
	if len(compiled) != len(grants) {
		return q.allowedBy(grants)
	}
	allowed := false
	if q.valid {
		for i := range compiled {
			if g := &compiled[i]; g.parsed && g.grants(q) && g.pattern.MatchValidTarget(q.target) {
				allowed = true
				break
			}
		}
	}
	if checkClaims() && allowed != q.allowedBy(grants) {
		panic(fmt.Sprintf("ledger: compiled grants %v allow %s on %s: %v, the grants themselves: %v", grants, q.t, q.target, allowed, !allowed))
	}
	return allowed
}

// allowedBy is Allows(grants, q.target, q.t).
func (q grantQuery) allowedBy(grants []event.Grant) bool {
	if !q.valid {
		return false
	}
	for _, g := range grants {
		if !slices.Contains(g.Actions, q.t) {
			continue
		}
		if p, err := patternCache.get(g.Pattern); err == nil && p.MatchValidTarget(q.target) {
			return true
		}
	}
	return false
}

// covers checks that everything child grants is granted by parent: each
// child grant, for each of its action types, by one parent grant whose
// pattern matches every target the child's does (capability.Set.CheckCovers,
// whose search is bounded, so no event can make it run long). A child
// covered only by the union of several parent grants is refused: sound, if
// sometimes stricter than needed.
func covers(parent, child []event.Grant) error {
	p, err := capability.SetFromEvent(parent)
	if err != nil {
		return err
	}
	c, err := capability.SetFromEvent(child)
	if err != nil {
		return err
	}
	return p.CheckCovers(c)
}
