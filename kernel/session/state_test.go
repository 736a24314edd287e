package session

import "testing"

func TestSpec10_1_StateMachine(t *testing.T) {
	all := []State{Created, Handshaking, Active, Terminating, Archived}
	allowed := map[[2]State]bool{
		{Created, Handshaking}:     true,
		{Handshaking, Active}:      true,
		{Created, Terminating}:     true,
		{Handshaking, Terminating}: true,
		{Active, Terminating}:      true,
		{Terminating, Archived}:    true,
	}
	for _, from := range all {
		for _, to := range all {
			if got, want := CanTransition(from, to), allowed[[2]State{from, to}]; got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
		if CanTransition(from, "BOGUS") || CanTransition("BOGUS", from) {
			t.Errorf("an unknown state is reachable from or leads to %s", from)
		}
	}
	for _, to := range all {
		if CanTransition(Archived, to) {
			t.Errorf("ARCHIVED → %s allowed; ARCHIVED is final", to)
		}
	}
}

func TestSpec10_1_StateFlags(t *testing.T) {
	cases := []struct {
		s                  State
		valid, joins, acts bool
	}{
		{Created, true, false, false},
		{Handshaking, true, true, false},
		{Active, true, false, true},
		{Terminating, true, false, false},
		{Archived, true, false, false},
		{"active", false, false, false},
		{"", false, false, false},
	}
	for _, c := range cases {
		if c.s.Valid() != c.valid || c.s.AcceptsParticipants() != c.joins || c.s.AcceptsActions() != c.acts {
			t.Errorf("%q: Valid=%v Joins=%v Actions=%v, want %v %v %v", c.s, c.s.Valid(), c.s.AcceptsParticipants(), c.s.AcceptsActions(), c.valid, c.joins, c.acts)
		}
	}
}

func TestSpec11_1_Enums(t *testing.T) {
	for _, i := range []Isolation{Snapshot, ReadCommitted, Serializable} {
		if !i.Valid() {
			t.Errorf("%s not valid", i)
		}
	}
	if Isolation("read_committed").Valid() || ConsistencyMode("strong").Valid() {
		t.Error("lower-case enum value accepted")
	}
	if !Strong.Valid() || !Eventual.Valid() {
		t.Error("STRONG/EVENTUAL not valid")
	}
}
