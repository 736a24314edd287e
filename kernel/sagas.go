package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/saga"
)

// Saga is a saga as the ledger knows it.
type Saga = ledger.Saga

// StartSaga records a saga an agent will run (§15): its steps, each with
// the action it performs and the compensation that undoes it, retries
// (default 2) and a timeout (default 300 s). id "" picks one. In a
// session, the agent must be an active participant of an ACTIVE session.
func (k *Kernel) StartSaga(ctx context.Context, by *Actor, id, sessionID string, steps []saga.StepSpec) (*Receipt, string, error) {
	const stage = "saga"
	if id == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, "", err
		}
		id = "saga-" + hex.EncodeToString(b[:])
	}
	if _, err := saga.New(id, by.ID, sessionID, steps); err != nil {
		return nil, "", denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	rc, err := k.control(ctx, stage, []string{"saga/" + id}, func(now time.Time) (*event.Event, error) {
		a, err := k.liveActor(stage, by.ID)
		if err != nil {
			return nil, err
		}
		if a.IsHuman() {
			return nil, denyAt(stage, GateAuthority, ErrInvalid, "%s is a human: agents run sagas", a.ID)
		}
		if err := k.agentMayAct(stage, a, sessionID, now); err != nil {
			return nil, err
		}
		if _, ok := k.ledger.Sagas[id]; ok {
			return nil, denyAt(stage, GateForm, ErrConflict, "saga %s already exists", id)
		}
		return &event.Event{Kind: event.KindSagaStarted, Actor: a.ID, Session: sessionID, Saga: &event.SagaRecord{ID: id, Steps: slices.Clone(steps)}}, nil
	})
	return rc, id, err
}

// agentMayAct checks the standing of an agent reporting on its own work:
// active, not stopped, not quarantined, and in a session an active
// participant of an ACTIVE session. The caller holds k.mu.
func (k *Kernel) agentMayAct(stage string, a *Actor, sessionID string, now time.Time) error {
	if a.Stopped {
		return denyAt(stage, GateActor, ErrForbidden, "agent %s is stopped by SIGSTOP", a.ID)
	}
	if q := k.quarantined(a.ID, sessionID, now); q != nil {
		return denyAt(stage, GateQuarantine, ErrForbidden, "agent %s is quarantined (%s) until %s", a.ID, q.Reason, q.ExpiresAt)
	}
	if err := k.drawToken(stage, a, sessionID, now); err != nil {
		return err
	}
	if sessionID == "" {
		return nil
	}
	se, ok := k.ledger.Sessions[sessionID]
	switch {
	case !ok:
		return denyAt(stage, GateSession, ErrNotFound, "session %s does not exist", sessionID)
	case !se.State.AcceptsActions():
		return denyAt(stage, GateSession, ErrForbidden, "session %s is %s, not ACTIVE", sessionID, se.State)
	case !se.IsActiveParticipant(a.ID):
		return denyAt(stage, GateSession, ErrForbidden, "%s is not an active participant of session %s", a.ID, sessionID)
	}
	return nil
}

// SagaReport is one transition an agent reports for a step.
type SagaReport struct {
	Step       string
	Transition string
	Reason     string
}

// ReportSagaStep records one transition of a step, reported by the agent
// that runs it: started, succeeded, failed (a retry while attempts are
// left, then compensation), compensating, compensated or
// compensation_failed. The saga's rules decide: steps run in order and
// compensation runs in reverse order (§15.3).
func (k *Kernel) ReportSagaStep(ctx context.Context, by *Actor, sagaID string, r SagaReport) (*Receipt, error) {
	const stage = "saga"
	if err := checkReason(stage, r.Reason); err != nil {
		return nil, err
	}
	return k.control(ctx, stage, []string{"saga/" + sagaID}, func(now time.Time) (*event.Event, error) {
		a, err := k.liveActor(stage, by.ID)
		if err != nil {
			return nil, err
		}
		s, ok := k.ledger.Sagas[sagaID]
		if !ok {
			return nil, denyAt(stage, GateForm, ErrNotFound, "saga %s does not exist", sagaID)
		}
		if owner := s.OwnerOf(r.Step); owner != a.ID {
			return nil, denyAt(stage, GateAuthority, ErrForbidden, "step %s of saga %s is %s's to report", r.Step, sagaID, owner)
		}
		if err := k.agentMayAct(stage, a, s.Session, now); err != nil {
			return nil, err
		}
		st := &event.SagaStep{Saga: sagaID, Step: r.Step, Transition: r.Transition, Reason: r.Reason}
		if err := ledger.ApplySagaTransition(s.Saga.Clone(), st); err != nil {
			return nil, denyAt(stage, GateForm, ErrConflict, "%v", err)
		}
		return &event.Event{Kind: event.KindSagaStep, Actor: a.ID, Session: s.Session, SagaStep: st}, nil
	})
}

// SagaView is a saga with what its agent should do next.
type SagaView struct {
	Saga
	// RetryAfterSeconds is the linear backoff (§15.2) before the current
	// step, which failed with attempts left, starts again.
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
	// NextCompensation is the step to undo next while compensating
	// (reverse order, §15.3).
	NextCompensation string `json:"next_compensation,omitempty"`
}

// SagaStatus returns a saga and its next move.
func (k *Kernel) SagaStatus(id string) (*SagaView, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, ok := k.ledger.Sagas[id]
	if !ok {
		return nil, denyAt("saga", GateForm, ErrNotFound, "saga %s does not exist", id)
	}
	v := &SagaView{Saga: *s}
	v.Saga.Saga = *s.Saga.Clone()
	v.StepStarted = maps.Clone(s.StepStarted)
	if cur := v.Current(); cur != nil && cur.State == saga.StepFailed && v.State == saga.Running {
		v.RetryAfterSeconds = saga.RetryDelay(cur.Attempts).Seconds()
	}
	v.NextCompensation, _ = v.Saga.Saga.NextCompensation()
	return v, nil
}

// ViewSaga returns a saga to its agent, to whoever runs one of its steps,
// and to the humans who oversee its agent.
func (k *Kernel) ViewSaga(viewer *Actor, id string) (*SagaView, error) {
	v, err := k.SagaStatus(id)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	a := k.ledger.Actors[v.Agent]
	k.mu.Unlock()
	mayView := viewer.ID == RootID || viewer.ID == v.Agent || (a != nil && a.Creator == viewer.ID)
	for _, st := range v.Steps {
		mayView = mayView || st.Agent == viewer.ID
	}
	if !mayView {
		return nil, denyAt("saga", GateAuthority, ErrForbidden, "%s may not see saga %s", viewer.ID, id)
	}
	return v, nil
}

// Sagas lists the sagas the viewer runs or oversees.
func (k *Kernel) Sagas(viewer *Actor) []Saga {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []Saga{}
	for _, s := range k.ledger.Sagas {
		a := k.ledger.Actors[s.Agent]
		if viewer.ID == RootID || viewer.ID == s.Agent || (a != nil && a.Creator == viewer.ID) {
			c := *s
			c.Saga = *s.Saga.Clone()
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Saga) int { return int(a.StartedAt) - int(b.StartedAt) })
	return out
}

// timeOutSagaSteps fails steps that have run past their timeout (§15.2).
func (k *Kernel) timeOutSagaSteps(ctx context.Context, now time.Time) {
	type late struct{ saga, step, started string }
	k.mu.Lock()
	var due []late
	for id, s := range k.ledger.Sagas {
		if s.State != saga.Running {
			continue
		}
		if cur := s.Current(); cur != nil && cur.State == saga.StepRunning {
			if expiredAt(addSeconds(s.StepStarted[cur.Spec.ID], cur.Spec.TimeoutSeconds), now) {
				due = append(due, late{id, cur.Spec.ID, s.StepStarted[cur.Spec.ID]})
			}
		}
	}
	k.mu.Unlock()
	for _, d := range due {
		_, err := k.control(ctx, "saga", []string{"saga/" + d.saga}, func(time.Time) (*event.Event, error) {
			s := k.ledger.Sagas[d.saga]
			cur := s.Current()
			if cur == nil || cur.Spec.ID != d.step || cur.State != saga.StepRunning || s.StepStarted[d.step] != d.started {
				return nil, denyAt("saga", GateForm, ErrConflict, "step %s of saga %s moved on", d.step, d.saga)
			}
			return &event.Event{Kind: event.KindSagaStep, Actor: event.KernelActor, Session: s.Session,
				SagaStep: &event.SagaStep{Saga: d.saga, Step: d.step, Transition: event.SagaTimedOut, Reason: "step_timeout_seconds passed"}}, nil
		})
		if err != nil && !errors.Is(err, ErrConflict) {
			k.logger.Warn("time out saga step", "saga", d.saga, "step", d.step, "err", err)
		}
	}
}

func addSeconds(t string, secs int) string {
	start, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return ""
	}
	return event.FormatTime(start.Add(time.Duration(secs) * time.Second))
}
