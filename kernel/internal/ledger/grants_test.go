package ledger

import (
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// TestAxiom4_3_DefaultDeny checks Allows: nothing is allowed unless one
// grant both matches the target and lists the action type.
func TestAxiom4_3_DefaultDeny(t *testing.T) {
	grants := []event.Grant{
		{Pattern: "workspace/**", Actions: []event.ActionType{event.Create, event.Mutate}},
		{Pattern: "mail/*", Actions: []event.ActionType{event.Observe}},
		{Pattern: "a**", Actions: []event.ActionType{event.Create}}, // not a pattern: grants nothing
	}
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
		{"a", event.Create, false},
		{"aa", event.Create, false},
		{"workspace/a", "*", false},
		{"workspace/a", "", false},
		{"workspace//a", event.Create, false},
		{"", event.Create, false},
	} {
		if got := Allows(grants, tc.target, tc.typ); got != tc.want {
			t.Errorf("Allows(%q, %q) = %v, want %v", tc.target, tc.typ, got, tc.want)
		}
	}
	if Allows(nil, "a", event.Observe) {
		t.Error("no grants allow something")
	}
}
