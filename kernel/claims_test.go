package kernel

import (
	"testing"

	"github.com/annal-dev/annal/kernel/internal/ledger"
)

func read(key string) ledger.Claim  { return ledger.Claim{Key: key} }
func write(key string) ledger.Claim { return ledger.Claim{Key: key, Exclusive: true} }

func TestClaims_SharedAndExclusive(t *testing.T) {
	c := newClaims()
	a1 := []ledger.Claim{read("actor/a"), read("envelope/e")}
	a2 := []ledger.Claim{read("actor/a")}
	if c.tryTake(a1) != nil || c.tryTake(a2) != nil {
		t.Fatal("two readers of one object could not both take it")
	}
	revoke := []ledger.Claim{write("envelope/e")}
	busy := c.tryTake(revoke)
	if busy == nil {
		t.Fatal("a writer took an object two readers hold")
	}
	// The writer waits; a new reader of the object yields to it, a reader
	// of something else does not.
	c.wait(revoke, false)
	if c.tryTake([]ledger.Claim{read("envelope/e")}) == nil {
		t.Fatal("a new reader went ahead of a waiting writer")
	}
	if c.tryTake([]ledger.Claim{read("envelope/other")}) != nil {
		t.Fatal("a reader of another object waited")
	}
	c.release(a1)
	select {
	case <-busy:
	default:
		t.Fatal("releasing the reader did not wake the writer")
	}
	if c.tryTake(revoke) != nil {
		t.Fatal("the writer could not take the object once its reader was gone")
	}
	c.wait(revoke, true)
	if c.tryTake([]ledger.Claim{read("envelope/e")}) == nil {
		t.Fatal("a reader took an object a writer holds")
	}
	c.release(revoke)
	c.release(a2)
	c.release([]ledger.Claim{read("envelope/other")})
	if len(c.m) != 0 {
		t.Fatalf("claims left behind: %v", c.m)
	}
}

// Two decisions that each change one object and read the other's (a kill of
// an agent in a session, and that agent joining the session), both waiting:
// neither may block the other by merely waiting, or both wait for ever.
func TestClaims_WaitingWritersDoNotDeadlock(t *testing.T) {
	c := newClaims()
	inFlight := []ledger.Claim{read("actor/a"), read("session/s")}
	if c.tryTake(inFlight) != nil {
		t.Fatal("a reader could not take free objects")
	}
	kill := []ledger.Claim{write("actor/a"), read("session/s")}
	join := []ledger.Claim{read("actor/a"), write("session/s")}
	for _, w := range [][]ledger.Claim{kill, join} {
		if c.tryTake(w) == nil {
			t.Fatal("a writer took an object a reader holds")
		}
		c.wait(w, false)
	}
	c.release(inFlight)
	// Once the action in flight is folded, one of them goes ahead.
	took := 0
	for _, w := range [][]ledger.Claim{kill, join} {
		if c.tryTake(w) == nil {
			took++
			c.release(w)
		}
	}
	if took == 0 {
		t.Fatal("two waiting writers block each other for ever")
	}
}
