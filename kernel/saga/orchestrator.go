package saga

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrSagaFailed is wrapped by Run's error when a saga does not succeed.
var ErrSagaFailed = errors.New("saga did not succeed")

// Transition is one state change, reported to Run's observer: a step's
// (Step set) or the saga's (Step empty). Attempt is the step's attempt
// count; Reason the step's failure or the saga's reason for compensating.
type Transition struct {
	Saga    string `json:"saga_id"`
	Step    string `json:"step_id,omitempty"`
	From    string `json:"from"`
	To      string `json:"to"`
	Attempt int    `json:"attempt,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Orchestrator runs sagas in process (§15). The zero value uses the §15.2
// defaults and real time.
type Orchestrator struct {
	// RetryBase is the base of the linear backoff; 0 means DefaultRetryDelay.
	RetryBase time.Duration
	// Sleep waits d or until ctx is done; nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// StepTimeout overrides a step's timeout; nil means its TimeoutSeconds.
	StepTimeout func(StepSpec) time.Duration
}

// Run drives s until it is final and returns nil if it succeeded, or an
// error wrapping ErrSagaFailed. Each attempt of a step runs exec under a
// context that expires after the step's timeout; a failed attempt with
// retries left is retried after attempt × RetryBase. When a step fails for
// good, or ctx is done, the succeeded steps are compensated in reverse order
// with compensate, under a context that is not cancelled with ctx (undo must
// run even when the caller gives up) but has the step's timeout. exec and
// compensate MUST honour their context: one that does not return by the
// deadline is abandoned and its late result ignored; a panic counts as a
// failure. observe, if not nil, gets every transition in order. A step left
// running in s (a crash between start and result) is failed as interrupted.
func (o *Orchestrator) Run(ctx context.Context, s *Saga, exec, compensate func(ctx context.Context, step StepSpec) error, observe func(Transition)) error {
	if observe == nil {
		observe = func(Transition) {}
	}
	do := func(f func() error) error { return apply(s, observe, "", f) }
	for s.State == Running {
		st := s.Current()
		if st.State == StepRunning {
			if err := do(func() error {
				_, err := s.StepFailed(st.Spec.ID, "interrupted before its result was recorded")
				return err
			}); err != nil {
				return err
			}
			continue
		}
		if ctx.Err() != nil {
			if err := do(func() error { return s.Abort(ctx.Err().Error()) }); err != nil {
				return err
			}
			break
		}
		if err := do(func() error { return s.StartStep(st.Spec.ID) }); err != nil {
			return err
		}
		err := o.attempt(ctx, st.Spec, exec)
		if err == nil {
			if err := do(func() error { return s.StepSucceeded(st.Spec.ID) }); err != nil {
				return err
			}
			continue
		}
		if ctx.Err() != nil {
			if err := do(func() error { return s.Abort(ctx.Err().Error()) }); err != nil {
				return err
			}
			break
		}
		var retry bool
		if err2 := do(func() error {
			var e error
			if errors.Is(err, context.DeadlineExceeded) {
				retry, e = s.StepTimedOut(st.Spec.ID)
			} else {
				retry, e = s.StepFailed(st.Spec.ID, err.Error())
			}
			return e
		}); err2 != nil {
			return err2
		}
		if retry {
			if err := o.sleep(ctx, linearDelay(st.Attempts, o.base())); err != nil {
				if err := do(func() error { return s.Abort(err.Error()) }); err != nil {
					return err
				}
			}
		}
	}
	undo := context.WithoutCancel(ctx)
	for s.State == Compensating {
		id, _ := s.NextCompensation()
		st := s.Step(id)
		if st.State == StepSucceeded {
			if err := do(func() error { return s.StartCompensation(id) }); err != nil {
				return err
			}
		}
		if err := o.attempt(undo, st.Spec, compensate); err != nil {
			if err := apply(s, observe, err.Error(), func() error { return s.CompensationFailed(id) }); err != nil {
				return err
			}
		} else if err := do(func() error { return s.Compensated(id) }); err != nil {
			return err
		}
	}
	if s.State == Succeeded {
		return nil
	}
	return fmt.Errorf("%w: saga %s is %s: %s", ErrSagaFailed, s.ID, s.State, s.Error)
}

func (o *Orchestrator) base() time.Duration {
	if o.RetryBase > 0 {
		return o.RetryBase
	}
	return DefaultRetryDelay
}

func (o *Orchestrator) sleep(ctx context.Context, d time.Duration) error {
	if o.Sleep != nil {
		return o.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attempt runs f once under the step's timeout, turning a panic into an
// error and abandoning f at the deadline.
func (o *Orchestrator) attempt(ctx context.Context, spec StepSpec, f func(context.Context, StepSpec) error) error {
	if f == nil {
		return errors.New("no function to run the step")
	}
	d := spec.Timeout()
	if o.StepTimeout != nil {
		d = o.StepTimeout(spec)
	}
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic: %v", p)
			}
		}()
		done <- f(sctx, spec)
	}()
	select {
	case err := <-done:
		if err != nil && sctx.Err() != nil {
			return fmt.Errorf("%w: %v", sctx.Err(), err)
		}
		return err
	case <-sctx.Done():
		return sctx.Err()
	}
}

// apply calls f and reports the state changes it made to s: step changes in
// step order, then the saga's. compReason, if set, is the reason reported
// for a step that moved to compensation_failed.
func apply(s *Saga, observe func(Transition), compReason string, f func() error) error {
	before := make([]StepState, len(s.Steps))
	for i, st := range s.Steps {
		before[i] = st.State
	}
	sagaBefore := s.State
	if err := f(); err != nil {
		return err
	}
	for i, st := range s.Steps {
		if st.State != before[i] {
			tr := Transition{Saga: s.ID, Step: st.Spec.ID, From: string(before[i]), To: string(st.State), Attempt: st.Attempts}
			switch st.State {
			case StepFailed:
				tr.Reason = st.Error
			case StepCompensationFailed:
				tr.Reason = clip(compReason)
			}
			observe(tr)
		}
	}
	if s.State != sagaBefore {
		tr := Transition{Saga: s.ID, From: string(sagaBefore), To: string(s.State)}
		if s.State != Succeeded {
			tr.Reason = s.Error
		}
		observe(tr)
	}
	return nil
}
