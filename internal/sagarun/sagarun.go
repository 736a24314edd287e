// Package sagarun is the saga orchestrator of Execution Control §15.3 for
// the compensations Annal runs itself: when a saga compensates, it runs the
// compensation of each previously completed step, in reverse order, as an
// execute the kernel decides before it runs and records after.
//
// The orchestrator runs outside the kernel (annal sagas run), as an agent's
// client, acting with the credential of the saga's agent — or, once a kill
// has terminated that agent and left its saga compensating (§12.3), of a
// human who oversees it (root or its creator), whom the kernel then lets
// report the compensations: the kernel
// decides and records, it never runs a tool. It is driven by the log: each
// move is read from the saga's state (the fold of the log, GET
// /v1/sagas/{id}) and written back as a saga.step report, so a run that
// stops anywhere is resumed by running it again.
//
// Its contract:
//
//   - Steps are compensated strictly in the order the kernel names
//     (next_compensation): the latest completed step first. Each is
//     reported compensating, then its compensation runs, then it is
//     reported compensated or compensation_failed; the kernel's rules refuse
//     any other order.
//   - A compensation that ran and failed (exit code not 0) is tried again up
//     to the step's max_retries, attempt n+1 starting RetryDelay(n) after
//     attempt n failed (linear backoff, §15.2). Every attempt is an execute
//     in the log, intent then result.
//   - A compensation the kernel does not allow (denied, or rejected by a
//     human) is not tried again: the step is reported compensation_failed
//     with the refusal, and the saga ends failed, as §15.3's machine says
//     (kernel/saga).
//   - A compensation that ran but whose result could not be recorded stops
//     the run with an error, leaving the step compensating: its intent stays
//     open in the log for a human to see. Running again runs it again, so a
//     compensation should be safe to repeat.
//   - A step with no compensate spec is left to its agent: the run stops
//     with ErrAgentCompensates.
package sagarun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/ctxsleep"
	"github.com/annal-dev/annal/kernel/saga"
)

// Kernel is what the orchestrator asks of annald (the Go client).
type Kernel interface {
	Saga(ctx context.Context, id string) (json.RawMessage, error)
	ReportStep(ctx context.Context, sagaID, step string, req api.StepReport) (*api.Controlled, error)
}

// Outcome is what the log holds of one run of a compensation: its intent,
// its result and the exit code recorded.
type Outcome struct {
	Intent, Result uint64
	ExitCode       int32
}

// ErrNotAllowed is wrapped by a Runner's error when the kernel did not
// allow the compensation (it never ran).
var ErrNotAllowed = errors.New("the kernel did not allow the compensation")

// ErrAgentCompensates: the next step to compensate names no compensation
// Annal can run; its agent compensates it.
var ErrAgentCompensates = errors.New("the step's compensation is its agent's to run")

// Runner runs one compensation of step as an execute. Its error wraps
// ErrNotAllowed when the compensation never ran; any other error means it
// could not be recorded.
type Runner func(ctx context.Context, step string, c *api.Compensate) (*Outcome, error)

// Orchestrator runs a saga's compensations.
type Orchestrator struct {
	Kernel Kernel
	Run    Runner
	// Sleep waits d (time.Sleep unless ctx ends); tests inject a clock.
	Sleep func(ctx context.Context, d time.Duration) error
	// Follow waits, polling every Poll, while the saga is still running;
	// otherwise Compensate returns at once for a running saga.
	Follow bool
	Poll   time.Duration
}

// View is the part of a saga's state the orchestrator reads.
type View struct {
	ID               string       `json:"saga_id"`
	State            saga.State   `json:"state"`
	Error            string       `json:"error,omitempty"`
	Steps            []ViewedStep `json:"steps"`
	NextCompensation string       `json:"next_compensation,omitempty"`
}

// ViewedStep is one step of a View.
type ViewedStep struct {
	Spec struct {
		ID         string          `json:"id"`
		Compensate *api.Compensate `json:"compensate,omitempty"`
		MaxRetries int             `json:"max_retries"`
	} `json:"spec"`
	State saga.StepState `json:"state"`
}

func (v *View) step(id string) *ViewedStep {
	for i := range v.Steps {
		if v.Steps[i].Spec.ID == id {
			return &v.Steps[i]
		}
	}
	return nil
}

// final reports whether the saga can move no more.
func (v *View) final() bool {
	return v.State == saga.Succeeded || v.State == saga.Compensated || v.State == saga.Failed
}

// Compensate runs saga id's compensations until it is final and returns
// its last view. A running saga is waited for with Follow, else returned
// as it is.
func (o *Orchestrator) Compensate(ctx context.Context, id string) (*View, error) {
	for {
		v, err := o.view(ctx, id)
		switch {
		case err != nil:
			return nil, err
		case v.final(), v.State == saga.Running && !o.Follow:
			return v, nil
		case v.State == saga.Running:
			if err := o.sleep(ctx, o.Poll); err != nil {
				return v, err
			}
			continue
		}
		if err := o.compensateNext(ctx, v); err != nil {
			return v, err
		}
	}
}

func (o *Orchestrator) view(ctx context.Context, id string) (*View, error) {
	raw, err := o.Kernel.Saga(ctx, id)
	if err != nil {
		return nil, err
	}
	var v View
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("saga %s: %w", id, err)
	}
	return &v, nil
}

// compensateNext compensates the step the kernel names next.
func (o *Orchestrator) compensateNext(ctx context.Context, v *View) error {
	st := v.step(v.NextCompensation)
	if st == nil {
		return fmt.Errorf("saga %s is compensating but names no step to compensate next", v.ID)
	}
	if st.Spec.Compensate == nil {
		return fmt.Errorf("saga %s step %s: %w", v.ID, st.Spec.ID, ErrAgentCompensates)
	}
	if st.State == saga.StepSucceeded {
		if err := o.report(ctx, v.ID, st.Spec.ID, "compensating", ""); err != nil {
			return err
		}
	}
	transition, reason, err := o.attempts(ctx, st)
	if err != nil {
		return fmt.Errorf("saga %s step %s: %w", v.ID, st.Spec.ID, err)
	}
	return o.report(ctx, v.ID, st.Spec.ID, transition, reason)
}

// attempts runs st's compensation until it succeeds, is not allowed, or
// has failed 1 + max_retries times, waiting the linear backoff between
// attempts; it returns the transition to report and why.
func (o *Orchestrator) attempts(ctx context.Context, st *ViewedStep) (transition, reason string, err error) {
	for attempt := 1; ; attempt++ {
		out, err := o.Run(ctx, st.Spec.ID, st.Spec.Compensate)
		switch {
		case errors.Is(err, ErrNotAllowed):
			return "compensation_failed", clip("not run: " + err.Error()), nil
		case err != nil:
			return "", "", err
		case out.ExitCode == 0:
			return "compensated", fmt.Sprintf("execute intent %d, result %d: exit 0 (attempt %d)", out.Intent, out.Result, attempt), nil
		case attempt > st.Spec.MaxRetries:
			return "compensation_failed", fmt.Sprintf("execute intent %d, result %d: exit %d after %d attempt(s)", out.Intent, out.Result, out.ExitCode, attempt), nil
		}
		if err := o.sleep(ctx, saga.RetryDelay(attempt)); err != nil {
			return "", "", err
		}
	}
}

func (o *Orchestrator) report(ctx context.Context, sagaID, step, transition, reason string) error {
	if _, err := o.Kernel.ReportStep(ctx, sagaID, step, api.StepReport{Transition: transition, Reason: reason}); err != nil {
		return fmt.Errorf("saga %s step %s: report %s: %w", sagaID, step, transition, err)
	}
	return nil
}

func (o *Orchestrator) sleep(ctx context.Context, d time.Duration) error {
	if o.Sleep != nil {
		return o.Sleep(ctx, d)
	}
	return ctxsleep.Sleep(ctx, d)
}

// clip keeps a reason within what a saga.step may carry: at most 1,024
// bytes of UTF-8.
func clip(s string) string {
	if len(s) > 1000 {
		s = s[:1000]
	}
	return strings.ToValidUTF8(s, "")
}
