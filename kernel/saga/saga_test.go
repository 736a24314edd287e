package saga

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func specs(ids ...string) []StepSpec {
	var out []StepSpec
	for _, id := range ids {
		out = append(out, NewStepSpec(id, "do-"+id, "undo-"+id))
	}
	return out
}

func mustNew(t *testing.T, ids ...string) *Saga {
	t.Helper()
	s, err := New("saga-1", "agent-1", "session-1", specs(ids...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSpec15_2_Defaults(t *testing.T) {
	sp := NewStepSpec("a", "x", "y")
	if sp.MaxRetries != 2 || sp.TimeoutSeconds != 300 {
		t.Fatalf("defaults %+v", sp)
	}
	if RetryDelay(0) != 0 || RetryDelay(1) != time.Second || RetryDelay(2) != 2*time.Second || RetryDelay(3) != 3*time.Second {
		t.Fatal("RetryDelay not linear in 1 s")
	}
}

func TestSpec15_2_Validate(t *testing.T) {
	ok := NewStepSpec("a", "x", "")
	mod := func(f func(*StepSpec)) StepSpec { s := ok; f(&s); return s }
	bad := []StepSpec{
		mod(func(s *StepSpec) { s.ID = "" }),
		mod(func(s *StepSpec) { s.ID = "a b" }),
		mod(func(s *StepSpec) { s.Action = "" }),
		mod(func(s *StepSpec) { s.MaxRetries = -1 }),
		mod(func(s *StepSpec) { s.MaxRetries = 11 }),
		mod(func(s *StepSpec) { s.TimeoutSeconds = 0 }),
		mod(func(s *StepSpec) { s.TimeoutSeconds = 86401 }),
	}
	for _, b := range bad {
		if err := b.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v) = %v", b, err)
		}
	}
	for _, g := range []StepSpec{ok, mod(func(s *StepSpec) { s.MaxRetries = 10; s.TimeoutSeconds = 86400 }), mod(func(s *StepSpec) { s.MaxRetries = 0; s.TimeoutSeconds = 1 })} {
		if err := g.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", g, err)
		}
	}
	many := make([]StepSpec, MaxSteps+1)
	for i := range many {
		many[i] = NewStepSpec("s"+string(rune('a'+i%26))+string(rune('a'+i/26)), "x", "")
	}
	cases := [][]StepSpec{nil, many, specs("a", "a"), {ok, mod(func(s *StepSpec) { s.ID = "b"; s.TimeoutSeconds = 0 })}}
	for _, c := range cases {
		if _, err := New("s", "a", "x", c); !errors.Is(err, ErrInvalid) {
			t.Errorf("New with %d steps: %v", len(c), err)
		}
	}
	if _, err := New("s", "a", "x", many[:MaxSteps]); err != nil {
		t.Errorf("New with %d steps: %v", MaxSteps, err)
	}
	if _, err := New("", "a", "x", specs("a")); !errors.Is(err, ErrInvalid) {
		t.Error("empty saga id accepted")
	}
}

func TestSpec15_HappyPath(t *testing.T) {
	s := mustNew(t, "a", "b")
	for _, id := range []string{"a", "b"} {
		if err := s.StartStep(id); err != nil {
			t.Fatal(err)
		}
		if err := s.StepSucceeded(id); err != nil {
			t.Fatal(err)
		}
	}
	if s.State != Succeeded {
		t.Fatalf("state %s", s.State)
	}
	if err := s.StartStep("a"); !errors.Is(err, ErrTransition) {
		t.Fatal("start after success")
	}
}

func TestSpec15_StepsInOrder(t *testing.T) {
	s := mustNew(t, "a", "b")
	refused := []func() error{
		func() error { return s.StartStep("b") },
		func() error { return s.StartStep("zz") },
		func() error { return s.StepSucceeded("a") },
		func() error { _, err := s.StepFailed("a", "x"); return err },
		func() error { return s.StartCompensation("a") },
		func() error { return s.Compensated("a") },
		func() error { return s.CompensationFailed("a") },
	}
	for i, f := range refused {
		before := s.Clone()
		if err := f(); !errors.Is(err, ErrTransition) {
			t.Errorf("case %d: %v, want ErrTransition", i, err)
		}
		if !reflect.DeepEqual(before, s) {
			t.Errorf("case %d: refused move changed the saga", i)
		}
	}
	s.StartStep("a")
	before := s.Clone()
	if err := s.StartStep("a"); !errors.Is(err, ErrTransition) || !reflect.DeepEqual(before, s) {
		t.Errorf("second start of a running step: %v", err)
	}
}

func TestSpec15_2_Retries(t *testing.T) {
	s := mustNew(t, "a")
	for attempt := 1; attempt <= 3; attempt++ {
		if err := s.StartStep("a"); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		retry, err := s.StepFailed("a", "boom")
		if err != nil || retry != (attempt <= 2) {
			t.Fatalf("attempt %d: retry=%v err=%v", attempt, retry, err)
		}
	}
	if s.Steps[0].Attempts != 3 || s.State != Compensated {
		t.Fatalf("after 3 failures: attempts %d, saga %s", s.Steps[0].Attempts, s.State)
	}
	if err := s.StartStep("a"); !errors.Is(err, ErrTransition) {
		t.Fatal("fourth attempt allowed")
	}
	z := specs("z")
	z[0].MaxRetries = 0
	s, _ = New("s", "a", "x", z)
	s.StartStep("z")
	if retry, _ := s.StepTimedOut("z"); retry || s.State != Compensated || s.Steps[0].Error != "timeout" {
		t.Fatalf("timeout with no retries: retry=%v %+v", retry, s)
	}
}

func TestSpec15_3_ReverseCompensation(t *testing.T) {
	s := mustNew(t, "a", "b", "c", "d")
	for _, id := range []string{"a", "b", "c"} {
		s.StartStep(id)
		s.StepSucceeded(id)
	}
	for i := 0; i < 3; i++ {
		s.StartStep("d")
		s.StepFailed("d", "no")
	}
	if s.State != Compensating {
		t.Fatalf("state %s", s.State)
	}
	var order []string
	for {
		id, ok := s.NextCompensation()
		if !ok {
			break
		}
		if err := s.Compensated(id); !errors.Is(err, ErrTransition) {
			t.Fatal("compensated without starting")
		}
		if err := s.StartCompensation(id); err != nil {
			t.Fatal(err)
		}
		if id == "b" {
			if err := s.CompensationFailed(id); err != nil {
				t.Fatal(err)
			}
		} else if err := s.Compensated(id); err != nil {
			t.Fatal(err)
		}
		order = append(order, id)
	}
	if !reflect.DeepEqual(order, []string{"c", "b", "a"}) {
		t.Fatalf("compensation order %v, want c b a", order)
	}
	if s.State != Failed {
		t.Fatalf("a failed compensation should leave the saga failed, got %s", s.State)
	}
	want := []StepState{StepCompensated, StepCompensationFailed, StepCompensated, StepFailed}
	for i, st := range s.Steps {
		if st.State != want[i] {
			t.Errorf("step %s: %s, want %s", st.Spec.ID, st.State, want[i])
		}
	}
}

func TestSpec15_3_CompensationOutOfOrderRefused(t *testing.T) {
	s := mustNew(t, "a", "b", "c")
	for _, id := range []string{"a", "b"} {
		s.StartStep(id)
		s.StepSucceeded(id)
	}
	if err := s.Abort("killed"); err != nil || s.State != Compensating {
		t.Fatal(err)
	}
	before := s.Clone()
	if err := s.StartCompensation("a"); !errors.Is(err, ErrTransition) || !reflect.DeepEqual(before, s) {
		t.Fatalf("compensating a before b: %v", err)
	}
	if err := s.Abort("again"); !errors.Is(err, ErrTransition) {
		t.Fatal("abort while compensating")
	}
}

func TestSpec15_AbortRunningStep(t *testing.T) {
	s := mustNew(t, "a", "b")
	s.StartStep("a")
	s.StepSucceeded("a")
	s.StartStep("b")
	if err := s.Abort("kill switch"); err != nil {
		t.Fatal(err)
	}
	if s.Steps[1].State != StepFailed || s.State != Compensating {
		t.Fatalf("%+v %s", s.Steps[1], s.State)
	}
	if id, ok := s.NextCompensation(); !ok || id != "a" {
		t.Fatalf("next %q %v", id, ok)
	}
}
