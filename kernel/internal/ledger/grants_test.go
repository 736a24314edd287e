package ledger

import (
	"fmt"
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

// The pattern cache answers what parsing answers, and stays bounded
// however many distinct patterns it is asked for.
func TestPatternCache_Bounded(t *testing.T) {
	var c patterns
	for i := range maxCachedPatterns + 10 {
		s := fmt.Sprintf("workspace/p%d/**", i)
		p, err := c.get(s)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Match(fmt.Sprintf("workspace/p%d/x", i)) || p.Match("workspace/other/x") {
			t.Fatalf("cached pattern %s matches wrongly", s)
		}
	}
	if n := c.n.Load(); n > maxCachedPatterns {
		t.Fatalf("%d patterns cached, more than %d", n, maxCachedPatterns)
	}
	size := 0
	c.m.Range(func(any, any) bool { size++; return true })
	if size > maxCachedPatterns || int64(size) != c.n.Load() {
		t.Fatalf("the cache holds %d patterns, counts %d", size, c.n.Load())
	}
	if _, err := c.get("workspace/***"); err == nil {
		t.Fatal("an invalid pattern was accepted")
	}
}
