package saga

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

type recorder struct {
	mu     sync.Mutex
	calls  []string
	trs    []Transition
	sleeps []time.Duration
}

func (r *recorder) log(s string) { r.mu.Lock(); r.calls = append(r.calls, s); r.mu.Unlock() }

func (r *recorder) orch() *Orchestrator {
	return &Orchestrator{
		Sleep:       func(_ context.Context, d time.Duration) error { r.sleeps = append(r.sleeps, d); return nil },
		StepTimeout: func(StepSpec) time.Duration { return 50 * time.Millisecond },
	}
}

func (r *recorder) observe(t Transition) { r.trs = append(r.trs, t) }

func (r *recorder) trace() []string {
	var out []string
	for _, t := range r.trs {
		out = append(out, fmt.Sprintf("%s:%s>%s", t.Step, t.From, t.To))
	}
	return out
}

func TestSpec15_Orchestrator_Success(t *testing.T) {
	r := &recorder{}
	s := mustNew(t, "a", "b")
	err := r.orch().Run(context.Background(), s,
		func(_ context.Context, sp StepSpec) error { r.log("do " + sp.ID); return nil },
		func(_ context.Context, sp StepSpec) error { r.log("undo " + sp.ID); return nil }, r.observe)
	if err != nil || s.State != Succeeded {
		t.Fatalf("%v %s", err, s.State)
	}
	want := []string{"a:pending>running", "a:running>succeeded", "b:pending>running", "b:running>succeeded", ":running>succeeded"}
	if !reflect.DeepEqual(r.trace(), want) || !reflect.DeepEqual(r.calls, []string{"do a", "do b"}) {
		t.Fatalf("trace %v calls %v", r.trace(), r.calls)
	}
}

func TestSpec15_3_Orchestrator_RetryThenCompensate(t *testing.T) {
	r := &recorder{}
	s := mustNew(t, "a", "b", "c")
	err := r.orch().Run(context.Background(), s,
		func(_ context.Context, sp StepSpec) error {
			r.log("do " + sp.ID)
			if sp.ID == "c" {
				return errors.New("disk full")
			}
			return nil
		},
		func(_ context.Context, sp StepSpec) error { r.log("undo " + sp.ID); return nil }, r.observe)
	if !errors.Is(err, ErrSagaFailed) || s.State != Compensated || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("%v %s", err, s.State)
	}
	wantCalls := []string{"do a", "do b", "do c", "do c", "do c", "undo b", "undo a"}
	if !reflect.DeepEqual(r.calls, wantCalls) {
		t.Fatalf("calls %v, want %v", r.calls, wantCalls)
	}
	if !reflect.DeepEqual(r.sleeps, []time.Duration{time.Second, 2 * time.Second}) {
		t.Fatalf("backoff %v, want 1s 2s", r.sleeps)
	}
	wantTrace := []string{
		"a:pending>running", "a:running>succeeded", "b:pending>running", "b:running>succeeded",
		"c:pending>running", "c:running>failed", "c:failed>running", "c:running>failed", "c:failed>running", "c:running>failed",
		":running>compensating",
		"b:succeeded>compensating", "b:compensating>compensated", "a:succeeded>compensating", "a:compensating>compensated",
		":compensating>compensated",
	}
	if !reflect.DeepEqual(r.trace(), wantTrace) {
		t.Fatalf("trace %v\nwant  %v", r.trace(), wantTrace)
	}
	last := r.trs[len(r.trs)-1]
	if last.Step != "" || last.To != string(Compensated) {
		t.Fatalf("last transition %+v", last)
	}
}

func TestSpec15_2_Orchestrator_Timeout(t *testing.T) {
	r := &recorder{}
	specs := specs("a", "slow")
	specs[1].MaxRetries = 0
	s, _ := New("s", "ag", "se", specs)
	start := time.Now()
	err := r.orch().Run(context.Background(), s,
		func(ctx context.Context, sp StepSpec) error {
			if sp.ID == "slow" {
				time.Sleep(5 * time.Second) // ignores ctx: abandoned at the deadline
			}
			return nil
		},
		func(_ context.Context, sp StepSpec) error { r.log("undo " + sp.ID); return nil }, r.observe)
	if !errors.Is(err, ErrSagaFailed) || s.Steps[1].Error != "timeout" || time.Since(start) > 2*time.Second {
		t.Fatalf("%v %+v after %v", err, s.Steps[1], time.Since(start))
	}
	if !reflect.DeepEqual(r.calls, []string{"undo a"}) {
		t.Fatalf("calls %v", r.calls)
	}
}

func TestSpec15_Orchestrator_PanicAndCompensationFailure(t *testing.T) {
	r := &recorder{}
	sp := specs("a", "b", "c")
	sp[2].MaxRetries = 0
	s, _ := New("s", "ag", "se", sp)
	err := r.orch().Run(context.Background(), s,
		func(_ context.Context, sp StepSpec) error {
			if sp.ID == "c" {
				panic("bad step")
			}
			return nil
		},
		func(_ context.Context, sp StepSpec) error {
			r.log("undo " + sp.ID)
			if sp.ID == "b" {
				return errors.New("cannot undo")
			}
			return nil
		}, r.observe)
	if !errors.Is(err, ErrSagaFailed) || s.State != Failed || !strings.Contains(s.Steps[2].Error, "panic") {
		t.Fatalf("%v %s %+v", err, s.State, s.Steps[2])
	}
	if !reflect.DeepEqual(r.calls, []string{"undo b", "undo a"}) {
		t.Fatalf("calls %v", r.calls)
	}
	found := false
	for _, tr := range r.trs {
		if tr.Step == "b" && tr.To == string(StepCompensationFailed) && tr.Reason == "cannot undo" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no compensation_failed transition with its reason: %+v", r.trs)
	}
}

func TestSpec15_Orchestrator_CancelledCompensatesAnyway(t *testing.T) {
	r := &recorder{}
	s := mustNew(t, "a", "b")
	ctx, cancel := context.WithCancel(context.Background())
	err := r.orch().Run(ctx, s,
		func(ctx context.Context, sp StepSpec) error {
			if sp.ID == "b" {
				cancel()
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		},
		func(ctx context.Context, sp StepSpec) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.log("undo " + sp.ID)
			return nil
		}, r.observe)
	if !errors.Is(err, ErrSagaFailed) || s.State != Compensated || !reflect.DeepEqual(r.calls, []string{"undo a"}) {
		t.Fatalf("%v %s %v", err, s.State, r.calls)
	}
	if !strings.HasPrefix(s.Error, "aborted") {
		t.Fatalf("saga error %q", s.Error)
	}
}

func TestSpec15_Orchestrator_ResumeInterrupted(t *testing.T) {
	r := &recorder{}
	s := mustNew(t, "a")
	s.StartStep("a") // a crash left it running
	err := r.orch().Run(context.Background(), s,
		func(context.Context, StepSpec) error { return nil }, nil, r.observe)
	if err != nil || s.Steps[0].Attempts != 2 {
		t.Fatalf("%v %+v", err, s.Steps[0])
	}
	if r.trs[0].To != string(StepFailed) || !strings.Contains(r.trs[0].Reason, "interrupted") {
		t.Fatalf("first transition %+v", r.trs[0])
	}
}

// TestSpec15_Replay checks that folding the reported transitions through the
// state machine again gives the same saga: the kernel's replay path.
func TestSpec15_Replay(t *testing.T) {
	r := &recorder{}
	live := mustNew(t, "a", "b", "c")
	r.orch().Run(context.Background(), live,
		func(_ context.Context, sp StepSpec) error {
			if sp.ID == "c" {
				return errors.New("x")
			}
			return nil
		},
		func(context.Context, StepSpec) error { return nil }, r.observe)
	replay := mustNew(t, "a", "b", "c")
	for _, tr := range r.trs {
		var err error
		switch {
		case tr.Step == "":
			continue // saga moves follow from step moves
		case tr.From == string(StepSucceeded) && tr.To == string(StepCompensating):
			err = replay.StartCompensation(tr.Step)
		case tr.To == string(StepRunning):
			err = replay.StartStep(tr.Step)
		case tr.To == string(StepSucceeded):
			err = replay.StepSucceeded(tr.Step)
		case tr.To == string(StepFailed):
			_, err = replay.StepFailed(tr.Step, tr.Reason)
		case tr.To == string(StepCompensated):
			err = replay.Compensated(tr.Step)
		case tr.To == string(StepCompensationFailed):
			err = replay.CompensationFailed(tr.Step)
		}
		if err != nil {
			t.Fatalf("replaying %+v: %v", tr, err)
		}
	}
	if !reflect.DeepEqual(live, replay) {
		t.Fatalf("replay differs:\nlive   %+v\nreplay %+v", live, replay)
	}
}
