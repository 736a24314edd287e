package capability

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// eventGrants writes grants as an event carries them, each spelt
// "pattern:type,type".
func eventGrants(spec ...string) []event.Grant {
	out := []event.Grant{}
	for _, s := range spec {
		pattern, acts, _ := strings.Cut(s, ":")
		g := event.Grant{Pattern: pattern}
		for a := range strings.SplitSeq(acts, ",") {
			g.Actions = append(g.Actions, event.ActionType(a))
		}
		out = append(out, g)
	}
	return out
}

// mustSet reads grants spelt as eventGrants spells them with SetFromEvent.
func mustSet(t testing.TB, spec ...string) Set {
	t.Helper()
	s, err := SetFromEvent(eventGrants(spec...))
	if err != nil {
		t.Fatalf("SetFromEvent(%v): %v", spec, err)
	}
	return s
}

// allTypes is the four action types as eventGrants spells them.
const allTypes = "create,execute,mutate,observe"

func TestSetFromEvent(t *testing.T) {
	got := mustSet(t, "workspace/**:mutate,create,mutate", "mail/*:observe", "**:"+allTypes)
	want := Set{
		{Pattern: mustParsePattern("workspace/**"), Actions: []event.ActionType{event.Create, event.Mutate}},
		{Pattern: mustParsePattern("mail/*"), Actions: []event.ActionType{event.Observe}},
		{Pattern: mustParsePattern("**"), Actions: allActions},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SetFromEvent = %v, want %v", got, want)
	}
	if s, err := SetFromEvent(nil); err != nil || len(s) != 0 {
		t.Errorf("SetFromEvent(nil) = %v, %v", s, err)
	}
	if _, err := SetFromEvent(slices.Repeat(eventGrants("a:observe"), maxGrants)); err != nil {
		t.Errorf("SetFromEvent refuses %d grants: %v", maxGrants, err)
	}
}

func TestSetFromEvent_Rejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grants  []event.Grant
		wantErr string
	}{
		{"bad pattern", eventGrants("a:observe", "a**:create"), "grant 2: invalid capability pattern"},
		{"empty pattern", eventGrants(":observe"), "the pattern is empty"},
		{"any action", eventGrants("a:*"), `action type "*" is not one of`},
		{"unknown action", eventGrants("a:delete"), `action type "delete" is not one of`},
		{"upper-case action", eventGrants("a:Observe"), `action type "Observe" is not one of`},
		{"no actions", []event.Grant{{Pattern: "a"}}, "lists no action type"},
		{"too many grants", slices.Repeat(eventGrants("a:observe"), maxGrants+1), "65 grants, more than 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SetFromEvent(tc.grants)
			if err == nil {
				t.Fatalf("SetFromEvent(%v) succeeds", tc.grants)
			}
			if !errors.Is(err, errInvalidGrant) {
				t.Errorf("error %v does not wrap errInvalidGrant", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestDef4_12_SetCovers checks delegation: each child grant and action type
// needs one parent grant with that type covering the child's pattern.
func TestDef4_12_SetCovers(t *testing.T) {
	parent := []string{"workspace/**:create,mutate", "workspace/*:observe", "a:observe", "a/*/**:observe"}
	for _, tc := range []struct {
		name    string
		child   []string
		wantErr string // "" when covered
	}{
		{"empty child", nil, ""},
		{"same grant", []string{"workspace/**:create,mutate"}, ""},
		{"narrower pattern", []string{"workspace/x/*:create"}, ""},
		{"fewer types", []string{"workspace/**:mutate"}, ""},
		{"types from different grants", []string{"workspace/*:observe,create"}, ""},
		{"wider pattern", []string{"work*/a:mutate"}, `not covered by "workspace/**" (target "workz/a" matches the grant, not "workspace/**")`},
		{"deeper pattern", []string{"workspace/**:observe"}, "no single parent grant with observe covers it"},
		{"type not listed", []string{"workspace/a:execute"}, "no parent grant lists execute"},
		{"one grant of two uncovered", []string{"workspace/a:create", "mail/*:create"}, "grant 2 (mail/*) for create"},
		{"union of parent grants", []string{"a/**:observe"}, "no single parent grant with observe covers it"},
		{"each part of the union", []string{"a:observe", "a/*/**:observe"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mustSet(t, parent...).CheckCovers(mustSet(t, tc.child...))
			if (err == nil) != (tc.wantErr == "") {
				t.Fatalf("CheckCovers = %v; want covered %v", err, tc.wantErr == "")
			}
			if err != nil {
				if !errors.Is(err, errNotCovered) {
					t.Errorf("error %v does not wrap errNotCovered", err)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not contain %q", err, tc.wantErr)
				}
			}
		})
	}
}

// TestSetCovers_Root checks that "**" with all four types covers any set,
// privileged targets included: covering is about patterns, and who may
// write system/ and ledger/ is the ledger's check.
func TestSetCovers_Root(t *testing.T) {
	root := mustSet(t, "**:"+allTypes)
	if err := root.CheckCovers(mustSet(t, "*/**:"+allTypes, "a*b:observe", "system/**:create")); err != nil {
		t.Errorf("root does not cover a set: %v", err)
	}
}

func TestSetCovers_OddGrants(t *testing.T) {
	root := mustSet(t, "**:"+allTypes)
	if root.CheckCovers(Set{{Actions: []event.ActionType{event.Observe}}}) == nil {
		t.Error("a grant with the zero Pattern is covered")
	}
	if root.CheckCovers(Set{{Pattern: mustParsePattern("a"), Actions: []event.ActionType{"delete"}}}) == nil {
		t.Error("a grant with an unknown action type is covered")
	}
	if err := (Set{}).CheckCovers(Set{{Pattern: mustParsePattern("a")}}); err != nil {
		t.Errorf("a grant that lists no action type needs covering: %v", err)
	}
}

// TestSetCovers_SearchBounds checks both bounds of CheckCovers: a pair that
// gives up at maxCoverStates counts as not covering and the next parent
// grant is tried; a set whose pairs together pass the set's budget is
// refused.
func TestSetCovers_SearchBounds(t *testing.T) {
	hardParent, hardChild := hardPair()
	parent := Set{
		{Pattern: hardParent, Actions: []event.ActionType{event.Observe}},
		{Pattern: mustParsePattern("**"), Actions: []event.ActionType{event.Observe}},
	}
	child := Set{{Pattern: hardChild, Actions: []event.ActionType{event.Observe}}}
	if err := parent.CheckCovers(child); err != nil {
		t.Errorf("CheckCovers: %v", err)
	}
	if err := parent[:1].CheckCovers(child); err == nil || !strings.Contains(err.Error(), "not covered by") {
		t.Errorf("CheckCovers with only the hard parent grant = %v", err)
	}
	err := parent.checkCovers(child, 100)
	if !errors.Is(err, errNotCovered) || !strings.Contains(err.Error(), "more search states than its limit") {
		t.Errorf("checkCovers with a budget of 100 = %v", err)
	}
}
