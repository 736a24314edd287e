package event

import (
	"fmt"
	"unicode/utf8"
)

// Grant is one capability: the targets a pattern matches, for some action
// types (Def. 4.11). Patterns are parsed and matched by kernel/internal/capability.
type Grant struct {
	Pattern string       `json:"pattern"`
	Actions []ActionType `json:"actions"`
}

// MaxGrants bounds the grants of an actor or envelope.
const MaxGrants = 64

func validateGrants(what string, gs []Grant) error {
	if len(gs) > MaxGrants {
		return fmt.Errorf("%s has %d grants, more than %d", what, len(gs), MaxGrants)
	}
	for i, g := range gs {
		if g.Pattern == "" || len(g.Pattern) > MaxTargetSize || !utf8.ValidString(g.Pattern) {
			return fmt.Errorf("%s grant %d: pattern must be 1 to %d bytes of UTF-8", what, i+1, MaxTargetSize)
		}
		if len(g.Actions) == 0 || len(g.Actions) > 4 {
			return fmt.Errorf("%s grant %d (%s): must list 1 to 4 action types", what, i+1, g.Pattern)
		}
		for j, t := range g.Actions {
			if !t.Valid() {
				return fmt.Errorf("%s grant %d (%s): action type %q is not one of observe, create, mutate, execute", what, i+1, g.Pattern, t)
			}
			if j > 0 && g.Actions[j-1] >= t {
				return fmt.Errorf("%s grant %d (%s): action types must be sorted and distinct", what, i+1, g.Pattern)
			}
		}
	}
	return nil
}
