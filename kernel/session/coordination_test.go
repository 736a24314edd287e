package session

import (
	"errors"
	"testing"
)

func TestCleanPath(t *testing.T) {
	for _, p := range []string{"a", "a/b.txt", "src/kernel", "é/日本"} {
		if _, err := CleanPath(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for _, p := range []string{"", ".", "..", "../x", "a/../b", "/a", "a/", "a//b", "a\\b", "a%2fb", "a\nb", "a\x7f", string(make([]byte, 4097))} {
		if _, err := CleanPath(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q accepted (%v)", p, err)
		}
	}
}

// A lock covers its path and everything below it, never a sibling with
// the same prefix.
func TestLocksCoverTheirSubtree(t *testing.T) {
	s := &Session{ID: "s", Config: DefaultConfig(), State: Active, Participants: map[string]*Participant{
		"a": {AgentDID: "a", IsActive: true}, "b": {AgentDID: "b", IsActive: true}}}
	s.Config.Isolation = Serializable
	if err := s.TakeLock("a", "src", 1); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"src": true, "src/x": true, "src/x/y": true, "srcs": false, "sr": false, "other": false} {
		if held, _ := s.LockedAgainst("b", p); (held != "") != want {
			t.Errorf("b writing %s: locked by %q, want locked %v", p, held, want)
		}
		if held, _ := s.LockedAgainst("a", p); held != "" {
			t.Errorf("the holder is kept out of %s", p)
		}
	}
	if err := s.TakeLock("b", "src/x", 2); !errors.Is(err, ErrLocked) {
		t.Errorf("a lock below another's: %v", err)
	}
	if err := s.TakeLock("b", "srcs", 2); err != nil {
		t.Errorf("a sibling: %v", err)
	}
	before := s.Clone()
	if err := s.ReleaseLock("b", "src", false); !errors.Is(err, ErrLocked) || len(s.Locks) != len(before.Locks) {
		t.Errorf("b released a's lock: %v", err)
	}
	if err := s.Leave("a"); err != nil || s.Locks["src"] != nil || s.Locks["srcs"] == nil {
		t.Errorf("leaving kept the leaver's locks or dropped another's: %v %+v", err, s.Locks)
	}
	if err := s.Transition(Terminating); err != nil || s.Locks != nil {
		t.Errorf("locks outlived the session's writes: %+v", s.Locks)
	}
}
