package kernel

import (
	"slices"

	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// claims are the objects that decided events not yet folded read and
// change (ledger.Claims). An event is decided only once it holds its
// claims, and holds them until it is folded, so two events whose effects
// may not commute are never in flight together: the second is decided on
// a ledger that has folded the first, and log order is decision order.
//
// A claim is shared (many readers) or exclusive (one writer). Writers are
// preferred: while a decision that changes an object waits for it, a
// decision that only reads (an action) waits too, so a stream of actions
// cannot starve a revoke. Nobody waits while holding claims — a decision
// that cannot take all of its claims at once takes none and waits — and a
// decision that changes something never yields to another's waiting, only
// to claims actually held, which their holders release once folded; so
// claims cannot deadlock. The table is guarded by k.mu.
type claims struct {
	m map[string]*claimState
	// spare are states of keys no longer claimed, for reuse: every action
	// claims its actor and envelope afresh, and lets go of them once
	// folded.
	spare []*claimState
}

// maxSpareClaims bounds the states kept for reuse.
const maxSpareClaims = 1024

type claimState struct {
	readers int
	writer  bool
	// writersWaiting counts writers waiting for the object; readers yield
	// to them.
	writersWaiting int
	// released, made when a decision has to wait for the object, is
	// closed (and dropped) when a holder lets go.
	released chan struct{}
}

func newClaims() claims { return claims{m: map[string]*claimState{}} }

func (t *claims) state(key string) *claimState {
	s, ok := t.m[key]
	if !ok {
		if n := len(t.spare); n > 0 {
			s, t.spare = t.spare[n-1], t.spare[:n-1]
		} else {
			s = &claimState{}
		}
		t.m[key] = s
	}
	return s
}

// busy returns the channel closed when a holder of s lets go.
func (s *claimState) busy() <-chan struct{} {
	if s.released == nil {
		s.released = make(chan struct{})
	}
	return s.released
}

// free reports whether c could be taken now by a decision that changes
// something (writer) or only reads.
func (s *claimState) free(c ledger.Claim, writer bool) bool {
	if c.Exclusive {
		return !s.writer && s.readers == 0
	}
	return !s.writer && (s.writersWaiting == 0 || writer)
}

// tryTake takes every claim of want at once and returns nil, or takes none
// and returns a channel closed when the first busy one is released. The
// caller holds k.mu.
func (t *claims) tryTake(want []ledger.Claim) <-chan struct{} {
	writer := slices.ContainsFunc(want, func(c ledger.Claim) bool { return c.Exclusive })
	// held are the states of the first claims found claimed already, so
	// that taking them looks none up twice (an event claims a few).
	var held [8]*claimState
	for i, c := range want {
		s, ok := t.m[c.Key]
		if ok && !s.free(c, writer) {
			return s.busy()
		}
		if i < len(held) {
			held[i] = s
		}
	}
	for i, c := range want {
		var s *claimState
		if i < len(held) {
			s = held[i]
		}
		if s == nil {
			s = t.state(c.Key)
		}
		if c.Exclusive {
			s.writer = true
		} else {
			s.readers++
		}
	}
	return nil
}

// wait registers want's writers as waiting (so that readers yield to them)
// or unregisters them (done). The caller holds k.mu.
func (t *claims) wait(want []ledger.Claim, done bool) {
	for _, c := range want {
		if !c.Exclusive {
			continue
		}
		s := t.state(c.Key)
		if done {
			s.writersWaiting--
			t.wake(c.Key, s)
		} else {
			s.writersWaiting++
		}
	}
}

// release lets go of claims taken by tryTake. The caller holds k.mu.
func (t *claims) release(held []ledger.Claim) {
	for _, c := range held {
		s := t.m[c.Key]
		if c.Exclusive {
			s.writer = false
		} else {
			s.readers--
		}
		t.wake(c.Key, s)
	}
}

func (t *claims) wake(key string, s *claimState) {
	if s.released != nil {
		close(s.released)
		s.released = nil
	}
	if s.readers == 0 && !s.writer && s.writersWaiting == 0 {
		delete(t.m, key)
		if len(t.spare) < maxSpareClaims {
			t.spare = append(t.spare, s)
		}
	}
}
