package session

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newSession(t *testing.T, cfg Config) *Session {
	t.Helper()
	s, err := New("session-1", "alice", cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func part(agent string) Participant {
	return Participant{AgentDID: agent, Ring: 2, SigmaRawBP: 7000, JoinedAt: t0.Format(time.RFC3339)}
}

func TestSpec10_New(t *testing.T) {
	for _, c := range []struct{ id, creator string }{{"", "a"}, {"a", ""}, {"-a", "b"}, {"a/b", "c"}, {"a", "b c"}} {
		if _, err := New(c.id, c.creator, DefaultConfig(), t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%q, %q) = %v, want ErrInvalid", c.id, c.creator, err)
		}
	}
	bad := DefaultConfig()
	bad.MaxParticipants = 0
	if _, err := New("s", "a", bad, t0); !errors.Is(err, ErrRange) {
		t.Errorf("New with bad config = %v", err)
	}
	s := newSession(t, DefaultConfig())
	if s.State != Created || s.CreatedAt != "2026-01-02T03:04:05Z" {
		t.Errorf("new session: %+v", s)
	}
}

func TestSpec10_1_Transition(t *testing.T) {
	s := newSession(t, DefaultConfig())
	if err := s.Transition(Active); !errors.Is(err, ErrTransition) || s.State != Created {
		t.Fatalf("CREATED→ACTIVE: %v, state %s", err, s.State)
	}
	for _, to := range []State{Handshaking, Active, Terminating, Archived} {
		if err := s.Transition(to); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Transition(Active); !errors.Is(err, ErrTransition) || s.State != Archived {
		t.Fatalf("ARCHIVED→ACTIVE: %v, state %s", err, s.State)
	}
}

func TestSpec10_3_Join(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxParticipants = 2
	s := newSession(t, cfg)
	if err := s.Join(part("bob"), 9000); !errors.Is(err, ErrState) {
		t.Fatalf("join in CREATED: %v", err)
	}
	s.Transition(Handshaking)
	p := part("bob")
	p.EffScoreBP = 10000 // the caller's claim is ignored
	if err := s.Join(p, 5999); !errors.Is(err, ErrScore) {
		t.Fatalf("join below min_eff_score: %v", err)
	}
	if err := s.Join(p, 6000); err != nil {
		t.Fatal(err)
	}
	if got := s.Participants["bob"]; got.EffScoreBP != 6000 || !got.IsActive {
		t.Fatalf("bob recorded as %+v", got)
	}
	if err := s.Join(part("bob"), 9000); !errors.Is(err, ErrAlreadyJoined) {
		t.Fatalf("second join: %v", err)
	}
	bad := []Participant{
		{AgentDID: "", Ring: 3, JoinedAt: t0.Format(time.RFC3339)},
		{AgentDID: "c", Ring: 4, JoinedAt: t0.Format(time.RFC3339)},
		{AgentDID: "c", Ring: -1, JoinedAt: t0.Format(time.RFC3339)},
		{AgentDID: "c", Ring: 3, SigmaRawBP: 10001, JoinedAt: t0.Format(time.RFC3339)},
		{AgentDID: "c", Ring: 3, JoinedAt: "yesterday"},
	}
	for _, b := range bad {
		before := s.Clone()
		if err := s.Join(b, 9000); !errors.Is(err, ErrRange) {
			t.Errorf("Join(%+v) = %v, want ErrRange", b, err)
		}
		if !reflect.DeepEqual(before, s) {
			t.Errorf("refused Join(%+v) changed the session", b)
		}
	}
	if err := s.Join(part("carol"), 10001); !errors.Is(err, ErrRange) {
		t.Errorf("eff score 10001: %v", err)
	}
	if err := s.Join(part("carol"), 10000); err != nil {
		t.Fatal(err)
	}
	if err := s.Join(part("dave"), 10000); !errors.Is(err, ErrFull) {
		t.Fatalf("third join with max 2: %v", err)
	}
	if err := s.Leave("carol"); err != nil {
		t.Fatal(err)
	}
	if err := s.Join(part("dave"), 10000); err != nil {
		t.Fatalf("join after a leave: %v", err)
	}
	var active []string
	for _, agent := range []string{"alice", "bob", "carol", "dave"} {
		if s.IsActiveParticipant(agent) {
			active = append(active, agent)
		}
	}
	if !reflect.DeepEqual(active, []string{"bob", "dave"}) || s.ActiveCount() != 2 {
		t.Fatalf("active = %v, count %d", active, s.ActiveCount())
	}
	s.Transition(Active)
	if err := s.Join(part("carol"), 10000); !errors.Is(err, ErrState) {
		t.Fatalf("join in ACTIVE: %v", err)
	}
}

func TestSpec10_3_Leave(t *testing.T) {
	s := newSession(t, DefaultConfig())
	s.Transition(Handshaking)
	s.Join(part("bob"), 9000)
	s.SetSubstitute("bob")
	if err := s.Leave("zed"); !errors.Is(err, ErrNotParticipant) {
		t.Fatal(err)
	}
	if err := s.Leave("bob"); err != nil || s.Substitute != "" {
		t.Fatalf("leave: %v, substitute %q", err, s.Substitute)
	}
	if err := s.Leave("bob"); !errors.Is(err, ErrNotParticipant) {
		t.Fatal("second leave accepted")
	}
}

func TestSpec11_5_CrossSessionOnlyReadCommitted(t *testing.T) {
	for _, iso := range []Isolation{Snapshot, Serializable} {
		cfg := DefaultConfig()
		cfg.Isolation = iso
		s := newSession(t, cfg)
		if err := s.GrantRead("session-2"); !errors.Is(err, ErrIsolation) || len(s.Grants) != 0 {
			t.Errorf("%s: GrantRead = %v, grants %v", iso, err, s.Grants)
		}
		sc := &Scope{Session: "session-1", Isolation: iso, Granted: []string{"session-2"}}
		if err := IsPathAllowed(sc, "sessions/session-2/x", false); !errors.Is(err, ErrIsolation) || !errors.Is(err, ErrDenied) {
			t.Errorf("%s: read of a granted session: %v", iso, err)
		}
	}
	cfg := DefaultConfig()
	cfg.Isolation = ReadCommitted
	s := newSession(t, cfg)
	for _, g := range []string{"session-3", "session-2", "session-3"} {
		if err := s.GrantRead(g); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(s.Grants, []string{"session-2", "session-3"}) {
		t.Fatalf("grants %v", s.Grants)
	}
	for _, g := range []string{"session-1", "", "../x", "a/b"} {
		if err := s.GrantRead(g); !errors.Is(err, ErrInvalid) {
			t.Errorf("GrantRead(%q) = %v", g, err)
		}
	}
	if err := IsPathAllowed(s.Scope(), "sessions/session-2/x", false); err != nil {
		t.Errorf("read granted under READ_COMMITTED: %v", err)
	}
	if err := IsPathAllowed(s.Scope(), "sessions/session-2/x", true); !errors.Is(err, ErrDenied) {
		t.Errorf("write granted under READ_COMMITTED: %v", err)
	}
	s.Transition(Terminating)
	if err := s.GrantRead("session-4"); !errors.Is(err, ErrState) {
		t.Errorf("grant while TERMINATING: %v", err)
	}
}

func TestSpec12_3_SetSubstitute(t *testing.T) {
	s := newSession(t, DefaultConfig())
	if err := s.SetSubstitute("alice"); !errors.Is(err, ErrNotParticipant) {
		t.Fatalf("creator who has not joined: %v", err)
	}
	s.Transition(Handshaking)
	s.Join(part("bob"), 9000)
	if err := s.SetSubstitute("bob"); err != nil || s.Substitute != "bob" {
		t.Fatal(err)
	}
	if err := s.SetSubstitute(""); err != nil || s.Substitute != "" {
		t.Fatal(err)
	}
	s.SetSubstitute("bob")
	s.Transition(Terminating)
	if err := s.SetSubstitute(""); !errors.Is(err, ErrState) || s.Substitute != "bob" {
		t.Fatalf("clear while TERMINATING: %v", err)
	}
}

func TestSpec10_2_Expired(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxDurationSeconds = 60
	s := newSession(t, cfg)
	cases := []struct {
		now  time.Time
		want bool
	}{
		{t0, false},
		{t0.Add(59*time.Second + 999*time.Millisecond), false},
		{t0.Add(60 * time.Second), true},
		{t0.Add(time.Hour), true},
	}
	for _, c := range cases {
		if got := s.Expired(c.now); got != c.want {
			t.Errorf("Expired(%v) = %v, want %v", c.now, got, c.want)
		}
	}
	s.CreatedAt = "garbage"
	if !s.Expired(t0) {
		t.Error("unparseable created_at not expired (fail closed)")
	}
}
