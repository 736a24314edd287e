package verifier

import (
	"reflect"
	"testing"
)

// fastSeeds are entries near the fast path's edges: each must get the same
// answer from both paths.
var fastSeeds = []string{
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"log.genesis","time":"2026-11-22T10:00:01Z","v":1}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"log.genesis","time":"2026-11-22T10:00:01Z","v":1.0}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"log.genesis","time":"2026-11-22T10:00:01Z","v":10}`,
	`{"Actor":"root","actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1,"x":[-0]}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1,"x":"\u001f\n\/"}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1,"x":"\u000a"}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1,"x":123456789012345}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1,"x":9007199254740993}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01.500Z","v":1}`,
	`{"action":{"Type":"create","target":"a","type":"create"},"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"action","time":"2026-11-22T10:00:01Z","v":1}`,
	`{"action":{"target":"a","type":"delete"},"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"action","time":"2026-11-22T10:00:01Z","v":1}`,
	`{"action":{"type":"create"},"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"hold.requested","time":"2026-11-22T10:00:01Z","v":1}`,
	`{"action":5,"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"log.genesis","time":"2026-11-22T10:00:01Z","v":1}`,
	`{"actor":"root","delta":{"a":[1,true,null,{}]},"id":"019a5c3e-0000-7000-8000-000000000001","kind":"session.delta","session":"s-1","time":"2026-11-22T10:00:01Z","v":1}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","session":null,"time":"2026-11-22T10:00:01Z","v":1}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1,"é":1}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1,"x":"é\u007f"}`,
	`{"actor":"root","b":1,"a":2,"id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","v":1} `,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","v":1}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","trace_id":"00000000000000000000000000000000","v":1}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","trace_id":"4BF92F3577B34DA6A3CE929D0E0E4736","v":1}`,
	`{"actor":"root","id":"019a5c3e-0000-7000-8000-000000000001","kind":"x","time":"2026-11-22T10:00:01Z","trace_id":7,"v":1}`,
}

// TestFastEvent_AgreesWithFullParser: on the seeds, the fast path accepts
// only what the full parser accepts, with the same fields, and takes the
// common case (an ordinary action event).
func TestFastEvent_AgreesWithFullParser(t *testing.T) {
	for _, s := range fastSeeds {
		checkFastAgrees(t, []byte(s))
	}
	for i := range 50 {
		e := actionEntry(i)
		checkFastAgrees(t, e)
		if _, ok := fastEvent(e); !ok {
			t.Errorf("the fast path does not take an ordinary action event: %s", e)
		}
	}
}

func checkFastAgrees(t *testing.T, entry []byte) {
	t.Helper()
	fast, ok := fastEvent(entry)
	slow, err := parseEventSlow(entry)
	if !ok {
		return
	}
	if err != nil {
		t.Fatalf("fast path accepts %q, the full parser refuses it: %v", entry, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("entry %q: fast path reads %+v, the full parser %+v", entry, fast, slow)
	}
}

// FuzzFastEvent: the fast path never accepts what the full parser refuses,
// and reads the same fields.
func FuzzFastEvent(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Add(actionEntry(7))
	f.Fuzz(func(t *testing.T, entry []byte) {
		checkFastAgrees(t, entry)
	})
}

func BenchmarkParseEvent(b *testing.B) {
	e := actionEntry(5)
	b.SetBytes(int64(len(e)))
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseEvent(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseEventSlow(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
