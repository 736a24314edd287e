package history

import (
	"testing"

	"github.com/annal-dev/annal/kernel/event"
)

// TestVerifiedAheadNamesOneEventOriginAndKey: a signature verified ahead
// spares the fold its verification only for that very event, over the
// statement of the same origin, under the same signing key.
func TestVerifiedAheadNamesOneEventOriginAndKey(t *testing.T) {
	ev, other := &event.Event{}, &event.Event{}
	p := &parsedRun{events: []*event.Event{ev, other}, verifiedBy: []string{"key-1", ""}, origin: "example.com/log"}
	for _, c := range []struct {
		name        string
		j           int
		ev          *event.Event
		origin, key string
		want        bool
	}{
		{"the event, origin and key", 0, ev, "example.com/log", "key-1", true},
		{"another key", 0, ev, "example.com/log", "key-2", false},
		{"another origin", 0, ev, "example.com/other", "key-1", false},
		{"another event at the index", 0, other, "example.com/log", "key-1", false},
		{"an event not verified", 1, other, "example.com/log", "", false},
		{"past the run", 2, ev, "example.com/log", "key-1", false},
	} {
		if got := p.verifiedAs(c.j, c.ev, c.origin, c.key); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	var none *parsedRun
	if none.verifiedAs(0, ev, "example.com/log", "key-1") {
		t.Error("no run: verified")
	}
	if (&parsedRun{events: []*event.Event{ev}}).verifiedAs(0, ev, "", "") {
		t.Error("a run with no signature verified: verified")
	}
}
