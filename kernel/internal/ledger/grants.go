package ledger

import (
	"slices"
	"sync"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/capability"
)

// patterns caches parsed capability patterns: grants are checked on every
// action, and a log names few distinct patterns.
type patterns struct {
	mu sync.Mutex
	m  map[string]capability.Pattern
}

const maxCachedPatterns = 4096

func (p *patterns) get(s string) (capability.Pattern, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pat, ok := p.m[s]; ok {
		return pat, nil
	}
	pat, err := capability.ParsePattern(s)
	if err != nil {
		return pat, err
	}
	if p.m == nil || len(p.m) >= maxCachedPatterns {
		p.m = map[string]capability.Pattern{}
	}
	p.m[s] = pat
	return pat, nil
}

var patternCache patterns

// ParsePattern parses a capability pattern through the cache the rules use.
func ParsePattern(s string) (capability.Pattern, error) { return patternCache.get(s) }

// Allows reports whether some grant lists t and matches target (Axiom 4.3:
// default deny).
func Allows(grants []event.Grant, target string, t event.ActionType) bool {
	for _, g := range grants {
		if !slices.Contains(g.Actions, t) {
			continue
		}
		if p, err := patternCache.get(g.Pattern); err == nil && p.Match(target) {
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
