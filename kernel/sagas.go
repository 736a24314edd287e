package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"

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
	d, err := k.decide(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindSagaStarted, Actor: by.ID, Session: sessionID, Saga: &event.SagaRecord{ID: id, Steps: slices.Clone(steps)}}, nil
	})
	if err != nil {
		return nil, "", err
	}
	return receiptOf(d, "", ""), id, nil
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
	return k.decideControl(ctx, stage, func(l *ledger.Ledger, _ event.Instant) (*event.Event, error) {
		var sess string // the rule refuses a saga that does not exist
		if s, ok := l.Sagas[sagaID]; ok {
			sess = s.Session
		}
		return &event.Event{Kind: event.KindSagaStep, Actor: by.ID, Session: sess,
			SagaStep: &event.SagaStep{Saga: sagaID, Step: r.Step, Transition: r.Transition, Reason: r.Reason}}, nil
	})
}

// SagaView is a saga with what its agent should do next.
type SagaView struct {
	Saga
	// RetryAfterSeconds is the linear backoff (§15.2) before the current
	// step, which failed with attempts left, starts again; RetryAt is when
	// its wait ends (the kernel refuses a start before, rules 6).
	RetryAfterSeconds float64        `json:"retry_after_seconds,omitempty"`
	RetryAt           *event.Instant `json:"retry_at,omitempty"`
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
	v.StepStarted, v.StepFailed = maps.Clone(s.StepStarted), maps.Clone(s.StepFailed)
	if cur := v.Current(); cur != nil {
		if at, ok := s.RetryAt(cur.Spec.ID); ok {
			v.RetryAfterSeconds = saga.RetryDelay(cur.Attempts).Seconds()
			v.RetryAt = &at
		}
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
