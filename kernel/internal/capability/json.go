package capability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/annal-dev/annal/kernel/event"
)

// grantJSON fixes the member order of a grant's encoding: pattern, actions.
type grantJSON struct {
	Pattern string             `json:"pattern"`
	Actions []event.ActionType `json:"actions"`
}

// MarshalJSON writes {"pattern":…,"actions":[…]} with the action types
// sorted and distinct. It refuses the zero Pattern and unknown action types.
func (g Grant) MarshalJSON() ([]byte, error) {
	if g.Pattern.IsZero() {
		return nil, fmt.Errorf("%w: the zero Pattern cannot be written", ErrInvalidGrant)
	}
	as, err := canonicalActions(g.Actions, true)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidGrant, g.Pattern, err)
	}
	return json.Marshal(grantJSON{Pattern: g.Pattern.text, Actions: as})
}

// UnmarshalJSON reads a grant strictly; see ParseGrant.
func (g *Grant) UnmarshalJSON(data []byte) error {
	parsed, err := ParseGrant(data)
	if err != nil {
		return err
	}
	*g = parsed
	return nil
}

// ParseGrant reads one grant from JSON: an object with exactly the members
// "pattern" (a string ParsePattern accepts) and "actions" (an array of 1 to 8
// action type names, "*" standing for all four; repeats are merged). It
// refuses other members, members spelt in another case, duplicate members,
// null in place of the object or of a member, and invalid JSON. Errors wrap
// ErrInvalidGrant.
func ParseGrant(data []byte) (Grant, error) {
	if err := event.CheckJSON(data); err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrInvalidGrant, err)
	}
	return parseGrant(data)
}

// parseGrant reads a grant from JSON that event.CheckJSON accepted, so that
// no member appears twice.
func parseGrant(data []byte) (Grant, error) {
	if !startsWith(data, '{') {
		return Grant{}, fmt.Errorf("%w: a grant is a JSON object", ErrInvalidGrant)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrInvalidGrant, err)
	}
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	slices.Sort(names) // the first unknown member named is the same each time
	for _, name := range names {
		if name != "pattern" && name != "actions" {
			return Grant{}, fmt.Errorf("%w: unknown member %q (a grant has \"pattern\" and \"actions\")", ErrInvalidGrant, name)
		}
	}
	rawPattern, ok := members["pattern"]
	if !ok || !startsWith(rawPattern, '"') {
		return Grant{}, fmt.Errorf("%w: \"pattern\" must be a string", ErrInvalidGrant)
	}
	var text string
	if err := json.Unmarshal(rawPattern, &text); err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrInvalidGrant, err)
	}
	p, err := ParsePattern(text)
	if err != nil {
		return Grant{}, fmt.Errorf("%w: %w", ErrInvalidGrant, err)
	}
	rawActions, ok := members["actions"]
	if !ok || !startsWith(rawActions, '[') {
		return Grant{}, fmt.Errorf("%w %q: \"actions\" must be an array of action types", ErrInvalidGrant, text)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(rawActions, &items); err != nil {
		return Grant{}, fmt.Errorf("%w %q: %w", ErrInvalidGrant, text, err)
	}
	if len(items) > maxActionsListed {
		return Grant{}, fmt.Errorf("%w %q: %d action types listed, more than %d", ErrInvalidGrant, text, len(items), maxActionsListed)
	}
	actions := make([]event.ActionType, 0, len(items))
	for _, item := range items {
		var a string
		if !startsWith(item, '"') || json.Unmarshal(item, &a) != nil {
			return Grant{}, fmt.Errorf("%w %q: an action type is a string, not %s", ErrInvalidGrant, text, item)
		}
		actions = append(actions, event.ActionType(a))
	}
	as, err := canonicalActions(actions, true)
	if err != nil {
		return Grant{}, fmt.Errorf("%w %q: %w", ErrInvalidGrant, text, err)
	}
	return Grant{Pattern: p, Actions: as}, nil
}

// MarshalJSON writes the grants as a JSON array, in order; a nil Set is
// written []. It refuses more than MaxGrants grants, and what Grant's
// MarshalJSON refuses.
func (s Set) MarshalJSON() ([]byte, error) {
	if len(s) > MaxGrants {
		return nil, fmt.Errorf("%w: %d grants, more than %d", ErrInvalidGrant, len(s), MaxGrants)
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, g := range s {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := g.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("grant %d: %w", i+1, err)
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads a set strictly; see ParseSet.
func (s *Set) UnmarshalJSON(data []byte) error {
	parsed, err := ParseSet(data)
	if err != nil {
		return err
	}
	*s = parsed
	return nil
}

// ParseSet reads a set of grants from JSON: an array (not null) of at most
// MaxGrants grants, each as ParseGrant reads one. The grants keep their order;
// Normalize gives the canonical form. Errors wrap ErrInvalidGrant.
func ParseSet(data []byte) (Set, error) {
	if err := event.CheckJSON(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidGrant, err)
	}
	if !startsWith(data, '[') {
		return nil, fmt.Errorf("%w: a set of grants is a JSON array", ErrInvalidGrant)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidGrant, err)
	}
	if len(items) > MaxGrants {
		return nil, fmt.Errorf("%w: %d grants, more than %d", ErrInvalidGrant, len(items), MaxGrants)
	}
	s := make(Set, 0, len(items))
	for i, item := range items {
		g, err := parseGrant(item)
		if err != nil {
			return nil, fmt.Errorf("grant %d: %w", i+1, err)
		}
		s = append(s, g)
	}
	return s, nil
}

// startsWith reports whether the first byte of data after JSON white space
// is c, which tells an object, array or string from null and the rest.
func startsWith(data []byte, c byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == c
}
