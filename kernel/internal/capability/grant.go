package capability

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
)

// MaxGrants bounds the grants of a Set, as it bounds an actor's or an
// envelope's grants in the log.
const MaxGrants = event.MaxGrants

// AnyAction, in a grant's list of action types, stands for all four. It is
// accepted on input and never written: grants list the four names instead.
const AnyAction event.ActionType = "*"

// maxActionsListed bounds the "actions" array read from JSON: the four types
// and "*", with room for a few repeats, which are merged.
const maxActionsListed = 8

var (
	// ErrInvalidGrant is wrapped by every error about a malformed grant or
	// set of grants.
	ErrInvalidGrant = errors.New("invalid capability grant")
	// ErrNotCovered is wrapped by the errors of Set.CheckCovers.
	ErrNotCovered = errors.New("capability not covered")
)

// allActions lists the four action types in their canonical order, sorted
// by name as event grants keep them.
var allActions = []event.ActionType{event.Create, event.Execute, event.Mutate, event.Observe}

// Grant is one capability: the action types allowed on the targets a
// pattern matches (Def. 4.11).
type Grant struct {
	Pattern Pattern
	// Actions is sorted and distinct in grants made by NewGrant or parsed,
	// which expand AnyAction: here it is not an action type.
	Actions []event.ActionType
}

// NewGrant makes a grant from a pattern and action types, AnyAction standing
// for all four. Errors wrap ErrInvalidGrant.
func NewGrant(pattern string, actions ...event.ActionType) (Grant, error) {
	p, err := ParsePattern(pattern)
	if err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrInvalidGrant, err)
	}
	as, err := canonicalActions(actions, true)
	if err != nil {
		return Grant{}, fmt.Errorf("%w %q: %w", ErrInvalidGrant, pattern, err)
	}
	return Grant{Pattern: p, Actions: as}, nil
}

// Lists reports whether the grant lists action type t.
func (g Grant) Lists(t event.ActionType) bool { return slices.Contains(g.Actions, t) }

// canonicalActions checks action types and returns them sorted and
// distinct; anyAllowed says whether AnyAction may stand for all four.
func canonicalActions(actions []event.ActionType, anyAllowed bool) ([]event.ActionType, error) {
	if len(actions) == 0 {
		return nil, errors.New("lists no action type")
	}
	var listed [4]bool
	for _, a := range actions {
		if a == AnyAction && anyAllowed {
			listed = [4]bool{true, true, true, true}
			continue
		}
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

// mergeActions returns the union of action types, sorted and distinct,
// AnyAction expanded. Unlike canonicalActions it keeps types it does not
// know, so that Normalize never drops what a caller wrote.
func mergeActions(lists ...[]event.ActionType) []event.ActionType {
	var out []event.ActionType
	for _, l := range lists {
		for _, a := range l {
			if a == AnyAction {
				out = append(out, allActions...)
			} else {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Set is the grants of an actor or an envelope. The zero Set allows nothing.
type Set []Grant

// RootSet is root's grant set: every target, every action type.
func RootSet() Set {
	return Set{{Pattern: MustParsePattern("**"), Actions: slices.Clone(allActions)}}
}

// Allows reports whether the set allows an action of type t on target:
// default deny, so false unless some grant lists t and its pattern matches
// target. It is false for a target event.ValidateTarget refuses and for a
// type that is not one of the four. It does not know who acts: privileged
// targets (IsPrivileged) need root whatever Allows says.
func (s Set) Allows(target string, t event.ActionType) bool {
	if !t.Valid() {
		return false
	}
	for _, g := range s {
		if g.Lists(t) && g.Pattern.Match(target) {
			return true
		}
	}
	return false
}

// Covers reports whether child grants nothing that parent does not (Def.
// 4.12): see CheckCovers.
func (parent Set) Covers(child Set) bool { return parent.CheckCovers(child) == nil }

// CheckCovers returns nil if, for each grant of child and each action type it
// lists, ONE grant of parent lists that type and covers the child grant's
// pattern (Covers). A child grant covered only by the union of several
// parent grants (say "a/**" by "a" and "a/*/**") is refused: conservative,
// and sound. The searches of all pairs together reach at most
// MaxSetCoverStates states; past that CheckCovers refuses. Errors wrap ErrNotCovered and name the child
// grant, the action type and, when one parent grant was a candidate, a
// target that shows the gap.
func (parent Set) CheckCovers(child Set) error {
	return parent.checkCovers(child, MaxSetCoverStates)
}

// checkCovers is CheckCovers spending at most budget search states.
func (parent Set) checkCovers(child Set, budget int) error {
	// covers[i][j] memoises Covers(parent[i], child[j]): 0 unknown, 1 yes,
	// 2 no.
	covers := make([][]byte, len(parent))
	for i := range covers {
		covers[i] = make([]byte, len(child))
	}
	for j, c := range child {
		for _, t := range c.Actions {
			if !t.Valid() {
				return fmt.Errorf("%w: grant %d (%s): %q is not an action type", ErrNotCovered, j+1, c.Pattern, t)
			}
			candidates := 0
			var candidate Pattern
			found := false
			for i, g := range parent {
				if !g.Lists(t) {
					continue
				}
				candidates++
				candidate = g.Pattern
				if covers[i][j] == 0 {
					limit := min(MaxCoverStates, budget)
					r := decideCover(g.Pattern, c.Pattern, limit)
					budget -= r.states
					if r.gaveUp && limit < MaxCoverStates {
						return fmt.Errorf("%w: grant %d (%s) for %s: deciding the set needs more search states than its limit (MaxSetCoverStates)", ErrNotCovered, j+1, c.Pattern, t)
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
		if target, ok := Counterexample(candidate, child); ok {
			why += fmt.Sprintf(" (target %q matches the grant, not %q)", target, candidate)
		}
	}
	return fmt.Errorf("%w: grant %d (%s) for %s: %s", ErrNotCovered, j+1, child, t, why)
}

// Normalize returns the canonical form of s: one grant per pattern, its
// action types merged, sorted and distinct (AnyAction expanded), grants
// sorted by pattern. For grants as NewGrant and the parsers make them, it
// allows and covers exactly what s does. Grants are merged by pattern text,
// not by meaning: "**/*" and "*/**" stay two grants.
func (s Set) Normalize() Set {
	var out Set
	index := map[string]int{}
	for _, g := range s {
		i, ok := index[g.Pattern.text]
		if !ok {
			i = len(out)
			index[g.Pattern.text] = i
			out = append(out, Grant{Pattern: g.Pattern})
		}
		out[i].Actions = mergeActions(out[i].Actions, g.Actions)
	}
	slices.SortFunc(out, func(a, b Grant) int { return strings.Compare(a.Pattern.text, b.Pattern.text) })
	return out
}

// SetFromEvent parses the grants an event carries. Action types must be the
// four names ("*" is not an event's spelling); the result is in the order
// given, each grant's types sorted and distinct.
func SetFromEvent(grants []event.Grant) (Set, error) {
	if len(grants) > MaxGrants {
		return nil, fmt.Errorf("%w: %d grants, more than %d", ErrInvalidGrant, len(grants), MaxGrants)
	}
	s := make(Set, 0, len(grants))
	for i, g := range grants {
		p, err := ParsePattern(g.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%w %d: %w", ErrInvalidGrant, i+1, err)
		}
		as, err := canonicalActions(g.Actions, false)
		if err != nil {
			return nil, fmt.Errorf("%w %d (%s): %w", ErrInvalidGrant, i+1, g.Pattern, err)
		}
		s = append(s, Grant{Pattern: p, Actions: as})
	}
	return s, nil
}

// EventGrants returns s as an event carries grants, each grant's action
// types sorted and distinct.
func (s Set) EventGrants() []event.Grant {
	out := make([]event.Grant, 0, len(s))
	for _, g := range s {
		out = append(out, event.Grant{Pattern: g.Pattern.text, Actions: mergeActions(g.Actions)})
	}
	return out
}
