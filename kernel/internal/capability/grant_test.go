package capability

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

func mustGrant(t testing.TB, pattern string, actions ...event.ActionType) Grant {
	t.Helper()
	g, err := NewGrant(pattern, actions...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustSet(t testing.TB, data string) Set {
	t.Helper()
	s, err := ParseSet([]byte(data))
	if err != nil {
		t.Fatalf("ParseSet(%s): %v", data, err)
	}
	return s
}

func TestGrantJSON_Canonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"pattern":"workspace/**","actions":["create","mutate"]}`, `{"pattern":"workspace/**","actions":["create","mutate"]}`},
		{`{"actions":["mutate","create"],"pattern":"workspace/**"}`, `{"pattern":"workspace/**","actions":["create","mutate"]}`},
		{`{"pattern":"**","actions":["*"]}`, `{"pattern":"**","actions":["create","execute","mutate","observe"]}`},
		{`{"pattern":"a","actions":["observe","*","observe"]}`, `{"pattern":"a","actions":["create","execute","mutate","observe"]}`},
		{`{"pattern":"a","actions":["observe","observe"]}`, `{"pattern":"a","actions":["observe"]}`},
		{` { "pattern" : "a<b&c>" , "actions" : [ "execute" ] } `, `{"pattern":"a\u003cb\u0026c\u003e","actions":["execute"]}`},
		{`{"pattern":"\u00e9/*","actions":["observe"]}`, `{"pattern":"é/*","actions":["observe"]}`},
	} {
		g, err := ParseGrant([]byte(tc.in))
		if err != nil {
			t.Errorf("ParseGrant(%s): %v", tc.in, err)
			continue
		}
		out, err := json.Marshal(g)
		if err != nil || string(out) != tc.want {
			t.Errorf("ParseGrant(%s) writes %s, %v; want %s", tc.in, out, err, tc.want)
		}
	}
}

func TestParseGrant_Rejects(t *testing.T) {
	for _, tc := range []struct{ name, in, wantErr string }{
		{"null", `null`, "a grant is a JSON object"},
		{"array", `[]`, "a grant is a JSON object"},
		{"unknown member", `{"pattern":"a","actions":["observe"],"budget":1}`, `unknown member "budget"`},
		{"member in another case", `{"Pattern":"a","actions":["observe"]}`, `unknown member "Pattern"`},
		{"member in another case beside the exact one", `{"pattern":"a","actions":["observe"],"Actions":["*"]}`, `unknown member "Actions"`},
		{"long s (U+017F), which folds to s", `{"pattern":"a","actionſ":["observe"]}`, `unknown member "actionſ"`},
		{"duplicate member", `{"pattern":"a","pattern":"b","actions":["observe"]}`, `member "pattern" twice`},
		{"no pattern", `{"actions":["observe"]}`, `"pattern" must be a string`},
		{"null pattern", `{"pattern":null,"actions":["observe"]}`, `"pattern" must be a string`},
		{"number pattern", `{"pattern":1,"actions":["observe"]}`, `"pattern" must be a string`},
		{"bad pattern", `{"pattern":"a**","actions":["observe"]}`, "** must be a whole segment"},
		{"empty pattern", `{"pattern":"","actions":["observe"]}`, "the pattern is empty"},
		{"no actions", `{"pattern":"a"}`, `"actions" must be an array`},
		{"null actions", `{"pattern":"a","actions":null}`, `"actions" must be an array`},
		{"string actions", `{"pattern":"a","actions":"observe"}`, `"actions" must be an array`},
		{"empty actions", `{"pattern":"a","actions":[]}`, "lists no action type"},
		{"unknown action", `{"pattern":"a","actions":["delete"]}`, `action type "delete" is not one of`},
		{"upper-case action", `{"pattern":"a","actions":["Observe"]}`, `action type "Observe" is not one of`},
		{"null action", `{"pattern":"a","actions":[null]}`, "an action type is a string, not null"},
		{"too many actions", `{"pattern":"a","actions":["observe","observe","observe","observe","observe","observe","observe","observe","observe"]}`, "9 action types listed, more than 8"},
		{"trailing data", `{"pattern":"a","actions":["observe"]} {}`, "data after its value"},
		{"invalid JSON", `{"pattern":"a",}`, "malformed"},
		{"invalid UTF-8", "{\"pattern\":\"\xff\",\"actions\":[\"observe\"]}", "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGrant([]byte(tc.in))
			if err == nil {
				t.Fatalf("ParseGrant(%s) succeeds", tc.in)
			}
			if !errors.Is(err, ErrInvalidGrant) {
				t.Errorf("error %v does not wrap ErrInvalidGrant", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseSet(t *testing.T) {
	in := `[{"pattern":"workspace/**","actions":["mutate","create"]},{"pattern":"mail/*","actions":["observe"]}]`
	s := mustSet(t, in)
	want := Set{mustGrant(t, "workspace/**", event.Create, event.Mutate), mustGrant(t, "mail/*", event.Observe)}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("ParseSet(%s) = %v, want %v", in, s, want)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if wantOut := `[{"pattern":"workspace/**","actions":["create","mutate"]},{"pattern":"mail/*","actions":["observe"]}]`; string(out) != wantOut {
		t.Errorf("Marshal = %s, want %s", out, wantOut)
	}
	var again Set
	if err := json.Unmarshal(out, &again); err != nil || !reflect.DeepEqual(again, s) {
		t.Errorf("round trip gives %v, %v", again, err)
	}
	if empty, err := json.Marshal(Set(nil)); err != nil || string(empty) != "[]" {
		t.Errorf("Marshal(nil Set) = %s, %v; want []", empty, err)
	}
	if s := mustSet(t, "[]"); len(s) != 0 || s.Allows("a", event.Observe) {
		t.Errorf("ParseSet([]) = %v", s)
	}
}

func TestParseSet_Rejects(t *testing.T) {
	grant := `{"pattern":"a","actions":["observe"]}`
	for _, tc := range []struct{ name, in, wantErr string }{
		{"null", `null`, "a set of grants is a JSON array"},
		{"object", grant, "a set of grants is a JSON array"},
		{"too many grants", "[" + strings.TrimSuffix(strings.Repeat(grant+",", MaxGrants+1), ",") + "]", "65 grants, more than 64"},
		{"bad grant", `[` + grant + `,{"pattern":"a/","actions":["observe"]}]`, "grant 2: invalid capability grant"},
		{"null grant", `[null]`, "grant 1: invalid capability grant: a grant is a JSON object"},
		{"duplicate member in a grant", `[{"pattern":"a","actions":["observe"],"actions":["create"]}]`, `member "actions" twice`},
		{"nested too deep", strings.Repeat("[", 40) + strings.Repeat("]", 40), "deeper than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSet([]byte(tc.in))
			if err == nil {
				t.Fatalf("ParseSet succeeds")
			}
			if !errors.Is(err, ErrInvalidGrant) {
				t.Errorf("error %v does not wrap ErrInvalidGrant", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
	if _, err := ParseSet([]byte("[" + strings.TrimSuffix(strings.Repeat(grant+",", MaxGrants), ",") + "]")); err != nil {
		t.Errorf("ParseSet refuses %d grants: %v", MaxGrants, err)
	}
}

func TestMarshal_Rejects(t *testing.T) {
	for name, s := range map[string]Set{
		"zero pattern":   {{Actions: []event.ActionType{event.Observe}}},
		"no actions":     {{Pattern: MustParsePattern("a")}},
		"unknown action": {{Pattern: MustParsePattern("a"), Actions: []event.ActionType{"delete"}}},
		"too many":       slices.Repeat(Set{{Pattern: MustParsePattern("a"), Actions: []event.ActionType{event.Observe}}}, MaxGrants+1),
	} {
		if out, err := json.Marshal(s); err == nil {
			t.Errorf("%s: Marshal writes %s", name, out)
		}
	}
}

// TestAxiom4_3_DefaultDeny checks Allows: nothing is allowed unless one
// grant both matches the target and lists the action type.
func TestAxiom4_3_DefaultDeny(t *testing.T) {
	s := mustSet(t, `[{"pattern":"workspace/**","actions":["create","mutate"]},{"pattern":"mail/*","actions":["observe"]}]`)
	for _, tc := range []struct {
		target string
		typ    event.ActionType
		want   bool
	}{
		{"workspace/a", event.Create, true},
		{"workspace", event.Mutate, true},
		{"workspace/a/b", event.Mutate, true},
		{"workspace/a", event.Observe, false},
		{"workspace/a", event.Execute, false},
		{"mail/inbox", event.Observe, true},
		{"mail/inbox", event.Create, false},
		{"mail/inbox/42", event.Observe, false},
		{"other", event.Observe, false},
		{"workspace/a", "*", false},
		{"workspace/a", "", false},
		{"workspace//a", event.Create, false},
		{"", event.Create, false},
	} {
		if got := s.Allows(tc.target, tc.typ); got != tc.want {
			t.Errorf("Allows(%q, %q) = %v, want %v", tc.target, tc.typ, got, tc.want)
		}
	}
	var none Set
	if none.Allows("a", event.Observe) {
		t.Error("the empty set allows something")
	}
}

func TestRootSet(t *testing.T) {
	root := RootSet()
	out, err := json.Marshal(root)
	if err != nil || string(out) != `[{"pattern":"**","actions":["create","execute","mutate","observe"]}]` {
		t.Errorf("RootSet is %s, %v", out, err)
	}
	for _, target := range []string{"a", "system/x", "ledger", "workspace/a/b"} {
		for _, typ := range allActions {
			if !root.Allows(target, typ) {
				t.Errorf("root is not allowed %s on %q", typ, target)
			}
		}
	}
	if !root.Covers(mustSet(t, `[{"pattern":"*/**","actions":["*"]},{"pattern":"a*b","actions":["observe"]}]`)) {
		t.Error("RootSet does not cover a set")
	}
	root[0].Actions[0] = "x"
	if RootSet()[0].Actions[0] != event.Create {
		t.Error("RootSet shares its slices between calls")
	}
}

// TestDef4_12_SetCovers checks delegation: each child grant and action type
// needs one parent grant with that type covering the child's pattern.
func TestDef4_12_SetCovers(t *testing.T) {
	parent := `[{"pattern":"workspace/**","actions":["create","mutate"]},{"pattern":"workspace/*","actions":["observe"]},{"pattern":"a","actions":["observe"]},{"pattern":"a/*/**","actions":["observe"]}]`
	for _, tc := range []struct {
		name, child string
		want        bool
		wantErr     string
	}{
		{"empty child", `[]`, true, ""},
		{"same grant", `[{"pattern":"workspace/**","actions":["create","mutate"]}]`, true, ""},
		{"narrower pattern", `[{"pattern":"workspace/x/*","actions":["create"]}]`, true, ""},
		{"fewer types", `[{"pattern":"workspace/**","actions":["mutate"]}]`, true, ""},
		{"types from different grants", `[{"pattern":"workspace/*","actions":["observe","create"]}]`, true, ""},
		{"wider pattern", `[{"pattern":"work*/a","actions":["mutate"]}]`, false, `not covered by "workspace/**" (target "workz/a" matches the grant, not "workspace/**")`},
		{"deeper pattern", `[{"pattern":"workspace/**","actions":["observe"]}]`, false, "no single parent grant with observe covers it"},
		{"type not listed", `[{"pattern":"workspace/a","actions":["execute"]}]`, false, "no parent grant lists execute"},
		{"one grant of two uncovered", `[{"pattern":"workspace/a","actions":["create"]},{"pattern":"mail/*","actions":["create"]}]`, false, "grant 2 (mail/*) for create"},
		{"union of parent grants", `[{"pattern":"a/**","actions":["observe"]}]`, false, "no single parent grant with observe covers it"},
		{"each part of the union", `[{"pattern":"a","actions":["observe"]},{"pattern":"a/*/**","actions":["observe"]}]`, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, c := mustSet(t, parent), mustSet(t, tc.child)
			err := p.CheckCovers(c)
			if got := p.Covers(c); got != tc.want || (err == nil) != tc.want {
				t.Fatalf("Covers = %v, CheckCovers = %v; want %v", got, err, tc.want)
			}
			if err != nil {
				if !errors.Is(err, ErrNotCovered) {
					t.Errorf("error %v does not wrap ErrNotCovered", err)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not contain %q", err, tc.wantErr)
				}
			}
		})
	}
}

func TestSetCovers_OddGrants(t *testing.T) {
	root := RootSet()
	if root.Covers(Set{{Actions: []event.ActionType{event.Observe}}}) {
		t.Error("a grant with the zero Pattern is covered")
	}
	if root.Covers(Set{{Pattern: MustParsePattern("a"), Actions: []event.ActionType{"delete"}}}) {
		t.Error("a grant with an unknown action type is covered")
	}
	if !(Set{}).Covers(Set{{Pattern: MustParsePattern("a")}}) {
		t.Error("a grant that lists no action type needs covering")
	}
}

func TestNormalize(t *testing.T) {
	s := Set{
		mustGrant(t, "workspace/**", event.Mutate),
		mustGrant(t, "mail/*", event.Observe),
		mustGrant(t, "workspace/**", event.Create, event.Mutate),
		mustGrant(t, "*/**", AnyAction),
		mustGrant(t, "**/*", event.Observe),
	}
	want := Set{
		mustGrant(t, "**/*", event.Observe),
		mustGrant(t, "*/**", AnyAction),
		mustGrant(t, "mail/*", event.Observe),
		mustGrant(t, "workspace/**", event.Create, event.Mutate),
	}
	got := s.Normalize()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize = %v, want %v", got, want)
	}
	if again := got.Normalize(); !reflect.DeepEqual(again, got) {
		t.Errorf("Normalize is not idempotent: %v", again)
	}
	if !got.Covers(s) || !s.Covers(got) {
		t.Error("Normalize changes what the set covers")
	}
	got[3].Actions[0] = "x"
	if s[2].Actions[0] != event.Create {
		t.Error("Normalize shares action slices with its input")
	}
}

func TestEventGrants(t *testing.T) {
	gs := []event.Grant{
		{Pattern: "workspace/**", Actions: []event.ActionType{event.Create, event.Mutate}},
		{Pattern: "**", Actions: []event.ActionType{event.Create, event.Execute, event.Mutate, event.Observe}},
	}
	s, err := SetFromEvent(gs)
	if err != nil {
		t.Fatal(err)
	}
	if back := s.EventGrants(); !reflect.DeepEqual(back, gs) {
		t.Errorf("EventGrants = %v, want %v", back, gs)
	}
	for _, bad := range [][]event.Grant{
		{{Pattern: "a**", Actions: []event.ActionType{event.Create}}},
		{{Pattern: "a", Actions: []event.ActionType{AnyAction}}},
		{{Pattern: "a"}},
		slices.Repeat([]event.Grant{gs[0]}, MaxGrants+1),
	} {
		if _, err := SetFromEvent(bad); !errors.Is(err, ErrInvalidGrant) {
			t.Errorf("SetFromEvent(%v) = %v, want ErrInvalidGrant", bad, err)
		}
	}
}

func TestNewGrant(t *testing.T) {
	g := mustGrant(t, "a/**", event.Observe, AnyAction)
	if !slices.Equal(g.Actions, allActions) {
		t.Errorf("NewGrant with * lists %v", g.Actions)
	}
	for _, tc := range []struct {
		pattern string
		actions []event.ActionType
	}{{"a**", []event.ActionType{event.Observe}}, {"a", nil}, {"a", []event.ActionType{"read"}}} {
		if _, err := NewGrant(tc.pattern, tc.actions...); !errors.Is(err, ErrInvalidGrant) {
			t.Errorf("NewGrant(%q, %v) = %v, want ErrInvalidGrant", tc.pattern, tc.actions, err)
		}
	}
}

// TestSetCovers_SearchBounds checks both bounds of CheckCovers: a pair that
// gives up at MaxCoverStates counts as not covering and the next parent
// grant is tried; a set whose pairs together pass the set's budget is
// refused.
func TestSetCovers_SearchBounds(t *testing.T) {
	hardParent, hardChild := hardPair()
	parent := Set{
		{Pattern: hardParent, Actions: []event.ActionType{event.Observe}},
		mustGrant(t, "**", event.Observe),
	}
	child := Set{{Pattern: hardChild, Actions: []event.ActionType{event.Observe}}}
	if err := parent.CheckCovers(child); err != nil {
		t.Errorf("CheckCovers: %v", err)
	}
	if err := parent[:1].CheckCovers(child); err == nil || !strings.Contains(err.Error(), "not covered by") {
		t.Errorf("CheckCovers with only the hard parent grant = %v", err)
	}
	err := parent.checkCovers(child, 100)
	if !errors.Is(err, ErrNotCovered) || !strings.Contains(err.Error(), "more search states than its limit") {
		t.Errorf("checkCovers with a budget of 100 = %v", err)
	}
}
