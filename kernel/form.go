package kernel

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// A request's form is checked where it enters, before any rule: the
// kernel canonicalises what it will log, so that every rule judges exactly
// the bytes the log will hold.

// allActions is every action type, sorted as grants list them.
var allActions = []event.ActionType{event.Create, event.Execute, event.Mutate, event.Observe}

// normalizeGrants checks and canonicalises requested grants: patterns
// parse, action types are known ("*" means all four), sorted, distinct.
func normalizeGrants(in []event.Grant) ([]event.Grant, error) {
	if len(in) > event.MaxGrants {
		return nil, fmt.Errorf("%d grants, more than %d", len(in), event.MaxGrants)
	}
	out := make([]event.Grant, 0, len(in))
	for _, g := range in {
		p, err := ledger.ParsePattern(g.Pattern)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %v", g.Pattern, err)
		}
		var acts []event.ActionType
		for _, t := range g.Actions {
			if t == "*" {
				acts = append(acts, allActions...)
				continue
			}
			if !t.Valid() {
				return nil, fmt.Errorf("grant %q: action type %q is not one of observe, create, mutate, execute", g.Pattern, t)
			}
			acts = append(acts, t)
		}
		if len(acts) == 0 {
			return nil, fmt.Errorf("grant %q lists no action type", g.Pattern)
		}
		slices.Sort(acts)
		out = append(out, event.Grant{Pattern: p.String(), Actions: slices.Compact(acts)})
	}
	return out, nil
}

// cleanResourcePaths cleans the file paths an action declares, before any
// ring or session check sees them: "x/../sessions/s/f" is the path
// "sessions/s/f", and is judged as that. A path that climbs out of the
// namespace root is refused.
func cleanResourcePaths(paths []string) ([]string, error) {
	if paths == nil {
		return nil, nil
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		if p == "" || strings.ContainsRune(p, '\\') {
			return nil, fmt.Errorf("path %q: paths are non-empty and slash-separated", p)
		}
		c := path.Clean(p)
		if c == "." || c == ".." || strings.HasPrefix(c, "../") {
			return nil, fmt.Errorf("path %q resolves to %q, outside the target namespace", p, c)
		}
		out[i] = c
	}
	return out, nil
}
