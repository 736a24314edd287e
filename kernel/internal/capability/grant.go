package capability

import (
	"errors"
	"fmt"
	"slices"

	"github.com/annal-dev/annal/kernel/event"
)

// maxGrants bounds the grants of a Set, as it bounds an actor's or an
// envelope's grants in the log.
const maxGrants = event.MaxGrants

var (
	// errInvalidGrant is wrapped by every error about a malformed grant or
	// set of grants.
	errInvalidGrant = errors.New("invalid capability grant")
	// errNotCovered is wrapped by the errors of Set.CheckCovers.
	errNotCovered = errors.New("capability not covered")
)

// allActions lists the four action types in their canonical order, sorted
// by name as event grants keep them.
var allActions = []event.ActionType{event.Create, event.Execute, event.Mutate, event.Observe}

// Grant is one capability: the action types allowed on the targets a
// pattern matches (Def. 4.11).
type Grant struct {
	Pattern Pattern
	// Actions is sorted and distinct in grants SetFromEvent makes.
	Actions []event.ActionType
}

// lists reports whether the grant lists action type t.
func (g Grant) lists(t event.ActionType) bool { return slices.Contains(g.Actions, t) }

// canonicalActions checks action types and returns them sorted and
// distinct.
func canonicalActions(actions []event.ActionType) ([]event.ActionType, error) {
	if len(actions) == 0 {
		return nil, errors.New("lists no action type")
	}
	var listed [4]bool
	for _, a := range actions {
		i := slices.Index(allActions, a)
		if i < 0 {
			return nil, fmt.Errorf("action type %q is not one of observe, create, mutate, execute", a)
		}
		listed[i] = true
	}
	var out []event.ActionType
	for i, a := range allActions {
		if listed[i] {
			out = append(out, a)
		}
	}
	return out, nil
}

// Set is the grants of an actor or an envelope, as SetFromEvent reads them.
type Set []Grant

// CheckCovers returns nil if child grants nothing that parent does not (Def.
// 4.12): if, for each grant of child and each action type it lists, ONE
// grant of parent lists that type and covers the child grant's pattern (see
// decideCover). A child grant covered only by the union of several parent
// grants (say "a/**" by "a" and "a/*/**") is refused: conservative, and
// sound. Each pair's search reaches at most maxCoverStates states, and the
// searches of all pairs together at most maxSetCoverStates; past either,
// CheckCovers refuses. Errors name the child grant, the action type and,
// when one parent grant was a candidate, a target that shows the gap.
func (parent Set) CheckCovers(child Set) error {
	return parent.checkCovers(child, maxSetCoverStates)
}

// checkCovers is CheckCovers spending at most budget search states.
func (parent Set) checkCovers(child Set, budget int) error {
	// covers[i][j] memoises whether parent[i]'s pattern covers child[j]'s:
	// 0 unknown, 1 yes, 2 no.
	covers := make([][]byte, len(parent))
	for i := range covers {
		covers[i] = make([]byte, len(child))
	}
	for j, c := range child {
		for _, t := range c.Actions {
			if !t.Valid() {
				return fmt.Errorf("%w: grant %d (%s): %q is not an action type", errNotCovered, j+1, c.Pattern, t)
			}
			candidates := 0
			var candidate Pattern
			found := false
			for i, g := range parent {
				if !g.lists(t) {
					continue
				}
				candidates++
				candidate = g.Pattern
				if covers[i][j] == 0 {
					limit := min(maxCoverStates, budget)
					r := decideCover(g.Pattern, c.Pattern, limit)
					budget -= r.states
					if r.gaveUp && limit < maxCoverStates {
						return fmt.Errorf("%w: grant %d (%s) for %s: deciding the set needs more search states than its limit (%d)", errNotCovered, j+1, c.Pattern, t, maxSetCoverStates)
					}
					covers[i][j] = 2
					if r.covered {
						covers[i][j] = 1
					}
				}
				if covers[i][j] == 1 {
					found = true
					break
				}
			}
			if !found {
				return notCovered(j, c.Pattern, t, candidates, candidate)
			}
		}
	}
	return nil
}

func notCovered(j int, child Pattern, t event.ActionType, candidates int, candidate Pattern) error {
	var why string
	switch {
	case candidates == 0:
		why = fmt.Sprintf("no parent grant lists %s", t)
	case candidates > 1:
		why = fmt.Sprintf("no single parent grant with %s covers it (grants are not combined)", t)
	default:
		why = fmt.Sprintf("not covered by %q", candidate)
		if target, ok := counterexample(candidate, child); ok {
			why += fmt.Sprintf(" (target %q matches the grant, not %q)", target, candidate)
		}
	}
	return fmt.Errorf("%w: grant %d (%s) for %s: %s", errNotCovered, j+1, child, t, why)
}

// SetFromEvent parses the grants an event carries. Action types must be the
// four names ("*" is not an event's spelling); the result is in the order
// given, each grant's types sorted and distinct.
func SetFromEvent(grants []event.Grant) (Set, error) {
	if len(grants) > maxGrants {
		return nil, fmt.Errorf("%w: %d grants, more than %d", errInvalidGrant, len(grants), maxGrants)
	}
	s := make(Set, 0, len(grants))
	for i, g := range grants {
		p, err := ParsePattern(g.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%w %d: %w", errInvalidGrant, i+1, err)
		}
		as, err := canonicalActions(g.Actions)
		if err != nil {
			return nil, fmt.Errorf("%w %d (%s): %w", errInvalidGrant, i+1, g.Pattern, err)
		}
		s = append(s, Grant{Pattern: p, Actions: as})
	}
	return s, nil
}
