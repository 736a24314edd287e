package kernel

import (
	"context"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// Actor is an actor as the ledger knows it: record, status and energy.
type Actor = ledger.Actor

// copyActor returns a copy that stays valid after the kernel's lock is
// released.
func copyActor(a *Actor) *Actor {
	c := *a
	return &c
}

// allActions is every action type, sorted as grants list them.
var allActions = []event.ActionType{event.Create, event.Execute, event.Mutate, event.Observe}

// inFlight is what decided events that are not yet durable hold: energy
// reserved from actors and envelopes, and claims on objects whose next
// change does not commute with another (a status change, a hold answer, a
// revocation). Decisions subtract reservations from what the durable
// ledger shows and never count energy that is not yet durable, so whatever
// order Tessera gives the in-flight events, every prefix of the log keeps
// every balance and budget within bounds.
type inFlight struct {
	actor    map[string]uint64
	envelope map[string]uint64
	claims   map[string]chan struct{}
	ids      map[string]bool // actor ids handed to creations in flight
}

func newInFlight() inFlight {
	return inFlight{actor: map[string]uint64{}, envelope: map[string]uint64{}, claims: map[string]chan struct{}{}, ids: map[string]bool{}}
}

// reservation is energy an in-flight event holds until it is durable (and
// folded, so the ledger shows it) or abandoned.
type reservation struct {
	actor     string
	envelopes []string
	amount    uint64
}

// reserve records r. The caller holds k.mu and has checked availability.
func (f *inFlight) reserve(r reservation) {
	if r.actor != "" {
		f.actor[r.actor] += r.amount
	}
	for _, e := range r.envelopes {
		f.envelope[e] += r.amount
	}
}

// release forgets r. The caller holds k.mu.
func (f *inFlight) release(r reservation) {
	if r.actor != "" {
		if f.actor[r.actor] -= r.amount; f.actor[r.actor] == 0 {
			delete(f.actor, r.actor)
		}
	}
	for _, e := range r.envelopes {
		if f.envelope[e] -= r.amount; f.envelope[e] == 0 {
			delete(f.envelope, e)
		}
	}
}

// claim takes the claim on key, waiting while another holds it. It is
// called without k.mu and returns with the claim held; release it with
// unclaim.
func (k *Kernel) claim(ctx context.Context, key string) error {
	for {
		k.mu.Lock()
		ch, taken := k.flight.claims[key]
		if !taken {
			k.flight.claims[key] = make(chan struct{})
			k.mu.Unlock()
			return nil
		}
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (k *Kernel) unclaim(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ch, ok := k.flight.claims[key]; ok {
		close(ch)
		delete(k.flight.claims, key)
	}
}
