package ledger

import (
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
	target string
	valid  bool // no pattern matches an invalid target
}

func newGrantQuery(t event.ActionType, target string) grantQuery {
	return grantQuery{t: t, target: target, valid: event.ValidateTarget(target) == nil}
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
