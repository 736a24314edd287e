package killswitch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ok(context.Context, string, string, Reason) error { return nil }

func TestSpec12_2_Reasons(t *testing.T) {
	for _, r := range []Reason{BehavioralDrift, RateLimit, RingBreach, Manual, QuarantineTimeout, SessionTimeout} {
		if !r.Valid() {
			t.Errorf("%s not valid", r)
		}
	}
	if Reason("rate_limit_exceeded").Valid() || Reason("").Valid() {
		t.Error("unknown reason valid")
	}
}

func TestSpec12_5_DefaultTimeout(t *testing.T) {
	if New(0).timeout != 5*time.Second || New(-1).timeout != 5*time.Second || New(time.Second).timeout != time.Second {
		t.Fatal("timeout defaults wrong")
	}
}

func TestSpec12_4_KillTerminated(t *testing.T) {
	s := New(time.Second)
	var got []string
	s.Register("a", func(_ context.Context, agent, session string, r Reason) error {
		got = append(got, agent, session, string(r))
		return nil
	})
	res := s.Kill(context.Background(), "k1", "a", "s1", Manual, nil, nil, t0)
	if !res.Terminated || res.KillID != "k1" || res.AgentDID != "a" || res.SessionID != "s1" || res.Reason != Manual ||
		res.Timestamp != "2026-01-02T03:04:05Z" || res.CompensationTriggered || len(res.Handoffs) != 0 {
		t.Fatalf("result %+v", res)
	}
	if strings.Join(got, ",") != "a,s1,manual" {
		t.Fatalf("callback got %v", got)
	}
	b, _ := json.Marshal(res)
	for _, f := range []string{"kill_id", "agent_did", "session_id", "reason", "timestamp", "handoffs", "handoff_success_count", "compensation_triggered", "terminated", "details"} {
		if !strings.Contains(string(b), `"`+f+`":`) {
			t.Errorf("JSON lacks %s: %s", f, b)
		}
	}
}

func TestSpec12_3_Handoff(t *testing.T) {
	cases := []struct {
		name      string
		sub       string
		handoff   func(step, to string) error
		statuses  string
		successes int
		comp      bool
	}{
		{"no substitute", "", nil, "compensation,compensation,compensation", 0, true},
		{"all handed off", "b", func(string, string) error { return nil }, "handed_off,handed_off,handed_off", 3, false},
		{"one fails", "b", func(step, _ string) error {
			if step == "st2" {
				return errors.New("busy")
			}
			return nil
		}, "handed_off,compensation,handed_off", 2, true},
		{"handoff panics", "b", func(step, _ string) error {
			if step == "st3" {
				panic("boom")
			}
			return nil
		}, "handed_off,handed_off,compensation", 2, true},
		{"no handoff func", "b", nil, "compensation,compensation,compensation", 0, true},
		{"substitute is the killed agent", "a", func(string, string) error { return nil }, "compensation,compensation,compensation", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(time.Second)
			s.Register("a", ok)
			if c.sub != "" {
				s.RegisterSubstitute("s1", c.sub)
			}
			res := s.Kill(context.Background(), "k", "a", "s1", RingBreach, []string{"st1", "st2", "st3"}, c.handoff, t0)
			var st []string
			for i, h := range res.Handoffs {
				st = append(st, h.Status)
				if h.StepID != fmt.Sprintf("st%d", i+1) || h.From != "a" {
					t.Errorf("handoff %d: %+v", i, h)
				}
				if h.Status == StatusHandedOff && h.To != c.sub {
					t.Errorf("handed off to %q, want %q", h.To, c.sub)
				}
			}
			if strings.Join(st, ",") != c.statuses || res.HandoffSuccessCount != c.successes || res.CompensationTriggered != c.comp || !res.Terminated {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

func TestSpec12_6_NoCallback(t *testing.T) {
	s := New(time.Second)
	res := s.Kill(context.Background(), "k", "a", "s1", Manual, []string{"x"}, nil, t0)
	if res.Terminated || !strings.Contains(res.Details, "no termination callback") || res.KillID != "k" || len(res.Handoffs) != 1 {
		t.Fatalf("result %+v", res)
	}
}

func TestSpec12_6_CallbackTimeout(t *testing.T) {
	s := New(50 * time.Millisecond)
	s.Register("a", func(ctx context.Context, _, _ string, _ Reason) error {
		<-ctx.Done()
		return ctx.Err()
	})
	s.Register("b", func(context.Context, string, string, Reason) error {
		time.Sleep(2 * time.Second) // ignores its context
		return nil
	})
	for _, agent := range []string{"a", "b"} {
		start := time.Now()
		res := s.Kill(context.Background(), "k", agent, "s1", SessionTimeout, nil, nil, t0)
		if res.Terminated || !strings.Contains(res.Details, "timeout") {
			t.Errorf("%s: result %+v", agent, res)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("%s: Kill took %v with a 50ms timeout", agent, el)
		}
	}
}

func TestSpec12_6_CallbackError(t *testing.T) {
	s := New(time.Second)
	s.Register("a", func(context.Context, string, string, Reason) error { return errors.New("refused by runtime") })
	res := s.Kill(context.Background(), "k", "a", "s1", Manual, nil, nil, t0)
	if res.Terminated || !strings.Contains(res.Details, "refused by runtime") {
		t.Fatalf("result %+v", res)
	}
}

func TestSpec12_6_CallbackPanic(t *testing.T) {
	s := New(time.Second)
	s.Register("a", func(context.Context, string, string, Reason) error { panic("kaboom") })
	res := s.Kill(context.Background(), "k", "a", "s1", Manual, nil, nil, t0)
	if res.Terminated || !strings.Contains(res.Details, "panic") || !strings.Contains(res.Details, "kaboom") {
		t.Fatalf("result %+v", res)
	}
}

func TestSpec12_6_UnknownReasonStillKills(t *testing.T) {
	s := New(time.Second)
	s.Register("a", ok)
	res := s.Kill(context.Background(), "k", "a", "s1", "weird", nil, nil, t0)
	if !res.Terminated || !strings.Contains(res.Details, "unknown kill reason") {
		t.Fatalf("result %+v", res)
	}
}

// registered reports whether agent has a callback in s.
func registered(s *Switch, agent string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.cbs[agent]
	return ok
}

// substitute is the substitute registered for session in s, "" if none.
func substitute(s *Switch, session string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs[session]
}

func TestSpec12_7_Cleanup(t *testing.T) {
	for _, cb := range []Callback{ok, func(context.Context, string, string, Reason) error { return errors.New("x") }} {
		s := New(time.Second)
		s.Register("a", cb)
		s.Register("c", ok)
		s.RegisterSubstitute("s1", "b")
		s.RegisterSubstitute("s2", "a")
		s.RegisterSubstitute("s3", "c")
		s.Kill(context.Background(), "k", "a", "s1", Manual, nil, nil, t0)
		if registered(s, "a") || substitute(s, "s1") != "" || substitute(s, "s2") != "" {
			t.Fatalf("not cleaned up: registered=%v s1=%q s2=%q", registered(s, "a"), substitute(s, "s1"), substitute(s, "s2"))
		}
		if !registered(s, "c") || substitute(s, "s3") != "c" {
			t.Fatal("cleanup removed another agent's registrations")
		}
		res := s.Kill(context.Background(), "k2", "a", "s1", Manual, nil, nil, t0)
		if res.Terminated {
			t.Fatal("second kill called a removed callback")
		}
	}
}

func TestSpec12_ConcurrentKillsCallOnce(t *testing.T) {
	s := New(time.Second)
	var calls atomic.Int32
	s.Register("a", func(context.Context, string, string, Reason) error { calls.Add(1); return nil })
	var wg sync.WaitGroup
	var terminated atomic.Int32
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.RegisterSubstitute("s", "b")
			if s.Kill(context.Background(), "k", "a", "s", Manual, []string{"x"}, func(string, string) error { return nil }, t0).Terminated {
				terminated.Add(1)
			}
		}()
	}
	wg.Wait()
	if calls.Load() != 1 || terminated.Load() != 1 {
		t.Fatalf("callback called %d times, %d terminated results", calls.Load(), terminated.Load())
	}
}
