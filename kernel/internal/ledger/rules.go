package ledger

import "github.com/annal-dev/annal/kernel/event"

// rule is the one rule of an event kind: its gates, run in order by
// Check's loop, what energy it draws while in flight, and how it folds.
type rule struct {
	gates []gate
	// apply folds an event whose gates passed. It cannot fail: every
	// gate it relies on is an inconsistent-class gate, which no rules
	// version tolerates.
	apply func(l *Ledger, index uint64, ev *event.Event)
	// draw is the energy a decided event takes from actors and envelopes
	// once folded; nil for kinds that take none.
	draw func(l *Ledger, ev *event.Event) Draw
	// byKernel: the kernel writes events of this kind on its own.
	byKernel bool
	// byRecord: the event records a refusal, so its actor need not be
	// able to act.
	byRecord bool
	// actionFacts: the gates share an action's facts, computed before them.
	actionFacts bool
	// claims names what an event of this kind reads and changes beyond its
	// actor and session (ledger.Claims).
	claims func(c *claimSet, ev *event.Event)
}

// rules is the table of rules, keyed by kind: one rule per kind. Each
// rule is declared in the file of its concept, which adds its row (an init
// of that file); TestEveryKindHasARule checks that no kind lacks one.
var rules = map[event.Kind]*rule{}

// Draw is the energy one event takes: Amount from the actor's available
// balance and from the remaining budget of each envelope.
type Draw struct {
	Actor     string
	Envelopes []string
	Amount    uint64
}

// Draw returns what ev takes from balances and budgets once folded, so
// that the kernel can hold it while ev is in flight.
func (l *Ledger) Draw(ev *event.Event) Draw {
	if r := l.ruleFor(ev); r != nil && r.draw != nil {
		return r.draw(l, ev)
	}
	return Draw{}
}

// Pending is the energy that decided events not yet folded will take: the
// gates subtract it from what the ledger shows, so every event in flight
// can still be folded whatever order the log gives them.
type Pending struct {
	Actors    map[string]uint64
	Envelopes map[string]uint64
}

// NewPending returns an empty Pending.
func NewPending() *Pending {
	return &Pending{Actors: map[string]uint64{}, Envelopes: map[string]uint64{}}
}

// Hold adds d.
func (p *Pending) Hold(d Draw) {
	if d.Amount == 0 {
		return
	}
	if d.Actor != "" {
		p.Actors[d.Actor] += d.Amount
	}
	for _, e := range d.Envelopes {
		p.Envelopes[e] += d.Amount
	}
}

// Release removes d, which Hold added.
func (p *Pending) Release(d Draw) {
	if d.Amount == 0 {
		return
	}
	if d.Actor != "" {
		if p.Actors[d.Actor] -= d.Amount; p.Actors[d.Actor] == 0 {
			delete(p.Actors, d.Actor)
		}
	}
	for _, e := range d.Envelopes {
		if p.Envelopes[e] -= d.Amount; p.Envelopes[e] == 0 {
			delete(p.Envelopes, e)
		}
	}
}

// available is what actor a can still take: its available balance less
// what events in flight hold.
func (c *checker) available(a *Actor) uint64 {
	have := a.Available()
	if c.opts.Pending != nil {
		have -= min(have, c.opts.Pending.Actors[a.ID])
	}
	return have
}

// remaining is what envelope v can still take.
func (c *checker) remaining(v *Envelope) uint64 {
	have := v.Remaining()
	if c.opts.Pending != nil {
		have -= min(have, c.opts.Pending.Envelopes[v.ID])
	}
	return have
}
