package quarantine

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestSpec13_1_Reasons(t *testing.T) {
	for _, r := range []Reason{BehavioralDrift, LiabilityViolation, RingBreach, RateLimitExceeded, Manual, CascadeSlash} {
		if !r.Valid() {
			t.Errorf("%s not valid", r)
		}
	}
	var s Set
	for _, r := range []Reason{"", "MANUAL", "rate_limit", "quarantine_timeout"} {
		if _, err := s.Quarantine("a", "s", r, t0, 0); !errors.Is(err, ErrReason) || s.Len() != 0 {
			t.Errorf("reason %q: %v, len %d", r, err, s.Len())
		}
	}
}

func TestSpec13_2_DefaultDuration(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		var s Set
		r, err := s.Quarantine("a", "s", Manual, t0, d)
		if err != nil || !r.ExpiresAt.Equal(t0.Add(300*time.Second)) || !r.StartedAt.Equal(t0) || !r.Active {
			t.Errorf("d=%v: %+v, %v", d, r, err)
		}
	}
	var s Set
	if _, err := s.Quarantine("a", "s", Manual, t0, MaxDuration+1); !errors.Is(err, ErrInvalid) {
		t.Errorf("over MaxDuration: %v", err)
	}
	if _, err := s.Quarantine("", "s", Manual, t0, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty agent: %v", err)
	}
}

func TestSpec13_4_IsQuarantined(t *testing.T) {
	var s Set
	s.Quarantine("a", "s1", RingBreach, t0, time.Minute)
	s.Quarantine("g", "", Manual, t0, time.Minute)
	cases := []struct {
		agent, session string
		now            time.Time
		want           bool
	}{
		{"a", "s1", t0, true},
		{"a", "s1", t0.Add(time.Minute - 1), true},
		{"a", "s1", t0.Add(time.Minute), false}, // expired before Tick
		{"a", "s2", t0, false},
		{"a", "", t0, false},
		{"b", "s1", t0, false},
		{"g", "s1", t0, true},
		{"g", "anything", t0, true},
		{"g", "", t0, true},
		{"g", "s1", t0.Add(2 * time.Minute), false},
	}
	for _, c := range cases {
		if _, got := s.IsQuarantined(c.agent, c.session, c.now); got != c.want {
			t.Errorf("IsQuarantined(%q, %q, +%v) = %v, want %v", c.agent, c.session, c.now.Sub(t0), got, c.want)
		}
	}
	s.Quarantine("g", "s1", CascadeSlash, t0, time.Hour)
	if r, ok := s.IsQuarantined("g", "s1", t0); !ok || r.Reason != CascadeSlash {
		t.Errorf("the later-expiring record should be returned, got %+v", r)
	}
}

func TestSpec13_4_Extend(t *testing.T) {
	var s Set
	s.Quarantine("a", "s", Manual, t0, time.Minute)
	r, err := s.Quarantine("a", "s", RingBreach, t0.Add(30*time.Second), time.Minute)
	if err != nil || !r.StartedAt.Equal(t0) || !r.ExpiresAt.Equal(t0.Add(90*time.Second)) || r.Reason != RingBreach {
		t.Fatalf("extend: %+v, %v", r, err)
	}
	r, _ = s.Quarantine("a", "s", Manual, t0.Add(40*time.Second), time.Second)
	if !r.ExpiresAt.Equal(t0.Add(90 * time.Second)) {
		t.Fatalf("a shorter quarantine shortened the record: %+v", r)
	}
	// After expiry, a new quarantine starts afresh.
	r, _ = s.Quarantine("a", "s", Manual, t0.Add(time.Hour), time.Second)
	if !r.StartedAt.Equal(t0.Add(time.Hour)) || s.Len() != 1 {
		t.Fatalf("fresh quarantine after expiry: %+v", r)
	}
}

func TestSpec13_4_Release(t *testing.T) {
	var s Set
	if err := s.Release("a", "s"); !errors.Is(err, ErrNotQuarantined) {
		t.Fatal(err)
	}
	s.Quarantine("a", "", Manual, t0, time.Minute)
	if err := s.Release("a", "s"); !errors.Is(err, ErrNotQuarantined) || s.Len() != 1 {
		t.Fatalf("releasing a session released a global quarantine: %v", err)
	}
	if err := s.Release("a", ""); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.IsQuarantined("a", "s", t0); ok {
		t.Fatal("still quarantined after release")
	}
	if err := s.Release("a", ""); !errors.Is(err, ErrNotQuarantined) {
		t.Fatal("second release accepted")
	}
}

func TestSpec13_4_Tick(t *testing.T) {
	var s Set
	s.Quarantine("b", "s", Manual, t0, time.Minute)
	s.Quarantine("a", "s", Manual, t0, time.Minute)
	s.Quarantine("a", "", Manual, t0, time.Hour)
	if got := s.Tick(t0.Add(time.Second)); len(got) != 0 {
		t.Fatalf("tick before expiry: %+v", got)
	}
	got := s.Tick(t0.Add(time.Minute))
	if len(got) != 2 || got[0].Agent != "a" || got[1].Agent != "b" || got[0].Active || got[1].Active {
		t.Fatalf("tick: %+v", got)
	}
	if s.Len() != 1 || len(s.Tick(t0.Add(time.Minute))) != 0 {
		t.Fatal("tick did not remove expired records")
	}
}

func TestSpec13_3_RecordJSON(t *testing.T) {
	var s Set
	r, _ := s.Quarantine("a", "s", RingBreach, time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)), time.Second)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agent_did":"a","session_id":"s","reason":"ring_breach","started_at":"2026-01-02T02:04:05.000000006Z","expires_at":"2026-01-02T02:04:06.000000006Z","is_active":true}`
	if string(b) != want {
		t.Fatalf("JSON %s\nwant %s", b, want)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip %+v, %v; want %+v", back, err, r)
	}
	if err := json.Unmarshal([]byte(`{"reason":"bogus","started_at":"2026-01-02T02:04:05Z","expires_at":"2026-01-02T02:04:05Z"}`), &back); !errors.Is(err, ErrReason) {
		t.Fatalf("bogus reason: %v", err)
	}
}

func TestSpec13_Deterministic(t *testing.T) {
	build := func() *Set {
		var s Set
		for _, a := range []string{"z", "m", "a", "q"} {
			s.Quarantine(a, "s", Manual, t0, time.Second)
		}
		return &s
	}
	a, b := build().Records(), build().Records()
	if !reflect.DeepEqual(a, b) || a[0].Agent != "a" || a[3].Agent != "z" {
		t.Fatalf("records not sorted: %+v", a)
	}
}
