package ledger

import (
	"fmt"
	"slices"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/saga"
)

// RulesSagaBackoff makes a step's retry wait its linear backoff (§15.2):
// a failed step starts again no sooner than RetryDelay(attempts) after the
// event that failed it, by the events' times. Under earlier rules the
// backoff was advice the kernel gave in a saga's view.
const RulesSagaBackoff = 6

// Saga is a saga and when its steps started.
type Saga struct {
	saga.Saga
	StartedAt uint64 `json:"started_at"`
	// StepStarted is the event time each step (or its compensation) last
	// started, for the step timeout (§15.2).
	StepStarted map[string]event.Instant `json:"step_started,omitempty"`
	// StepFailed is the event time each step last failed or timed out, for
	// the retry backoff (§15.2).
	StepFailed map[string]event.Instant `json:"step_failed,omitempty"`
}

// RetryAt is when the failed step id may start again: RetryDelay(attempts)
// after its failure; ok is false unless id failed with attempts left while
// the saga runs.
func (s *Saga) RetryAt(id string) (at event.Instant, ok bool) {
	st := s.Step(id)
	if s.State != saga.Running || st == nil || st.State != saga.StepFailed || st.Attempts > st.Spec.MaxRetries {
		return event.Instant{}, false
	}
	failed, ok := s.StepFailed[id]
	if !ok {
		return event.Instant{}, false
	}
	return failed.Add(saga.RetryDelay(st.Attempts)), true
}

// backoffViolation refuses a retry started before its backoff ends.
func backoffViolation(s *Saga, st *event.SagaStep, now event.Instant) *Violation {
	if st.Transition != event.SagaStart {
		return nil
	}
	at, ok := s.RetryAt(st.Step)
	if !ok || at.ReachedBy(now) {
		return nil
	}
	return &Violation{Class: Conflict, since: RulesSagaBackoff, Reason: fmt.Sprintf(
		"saga %s step %s failed %d time(s) and may start again at %s, not %s (linear backoff, §15.2: retry n waits n × %v)",
		s.ID, st.Step, s.Step(st.Step).Attempts, at, now, saga.DefaultRetryDelay)}
}

// StepDeadline is when the step now running in s times out, and its id;
// ok is false when no step is running.
func (s *Saga) StepDeadline() (step string, deadline event.Instant, ok bool) {
	cur := s.Current()
	if s.State != saga.Running || cur == nil || cur.State != saga.StepRunning {
		return "", event.Instant{}, false
	}
	started, ok := s.StepStarted[cur.Spec.ID]
	if !ok {
		return "", event.Instant{}, false
	}
	return cur.Spec.ID, started.Add(time.Duration(cur.Spec.TimeoutSeconds) * time.Second), true
}

// saga.started: an agent records a saga it will run (§15).
var sagaStartedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write("saga/" + ev.Saga.ID)
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		if c.actor.IsHuman() {
			return inconsistent(Forbidden, "%s is a human: agents run sagas", c.actor.ID)
		}
		if _, ok := c.l.Sagas[c.ev.Saga.ID]; ok {
			return inconsistent(Conflict, "saga %s already exists", c.ev.Saga.ID)
		}
		if _, err := saga.New(c.ev.Saga.ID, c.ev.Actor, c.ev.Session, c.ev.Saga.Steps); err != nil {
			return inconsistent(Invalid, "%v", err)
		}
		return sessionStanding(c.actor.ID, c.ev.Session, c.l.Sessions[c.ev.Session], sagaWork)
	})),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		s, _ := saga.New(ev.Saga.ID, ev.Actor, ev.Session, ev.Saga.Steps)
		l.Sagas[s.ID] = &Saga{Saga: *s, StartedAt: index, StepStarted: map[string]event.Instant{}}
		l.touch("saga/" + s.ID)
	},
}

// compensatesFor says whether by, who does not run step st of saga s,
// may still report its compensation: from RulesSagaBackoff, a human who
// oversees the step's agent once that agent is terminated (a kill without
// a substitute leaves its saga compensating, §12.3, and nobody else could
// run the compensations §15.3 requires, annal sagas run).
func (l *Ledger) compensatesFor(by, owner string, s *Saga, st *event.SagaStep) *Violation {
	notYours := inconsistent(Forbidden, "%s reported step %s of saga %s, which is %s's", by, st.Step, s.ID, owner)
	switch st.Transition {
	case event.SagaCompensating, event.SagaCompensated, event.SagaCompensationFailed:
	default:
		return notYours
	}
	a, v := l.oversee(by, owner)
	switch {
	case l.Rules < RulesSagaBackoff || v != nil:
		return notYours
	case a.Status != event.StatusTerminated:
		return refuse(Forbidden, "%s runs step %s of saga %s and is %s: it compensates the step itself; its overseer does once it is terminated", owner, st.Step, s.ID, a.Status)
	}
	return nil
}

// saga.step: the agent that runs a step reports one transition, under the
// saga's rules (steps in order, compensation in reverse, §15.3), or a human
// who oversees it its compensation once it is terminated; the kernel
// reports a step that ran past its timeout.
var sagaStepRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write("saga/" + ev.SagaStep.Saga)
		s, ok := c.l.Sagas[ev.SagaStep.Saga]
		if ok && s.Session != "" {
			c.read(sessionKey(s.Session)) // the reporter's standing in it; a saga never changes session
		}
		if ok && s.OwnerOf(ev.SagaStep.Step) != ev.Actor {
			c.read(actorKey(s.OwnerOf(ev.SagaStep.Step))) // its end, for an overseer's compensation
		}
	},
	byKernel: true,
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		st := c.ev.SagaStep
		s, ok := c.l.Sagas[st.Saga]
		if !ok {
			return inconsistent(NotFound, "saga %s does not exist", st.Saga)
		}
		if c.ev.Actor == event.KernelActor {
			step, deadline, running := s.StepDeadline()
			if st.Transition != event.SagaTimedOut || !running || step != st.Step || !deadline.ReachedBy(c.at) {
				return refuse(Forbidden, "the kernel reports only a step that ran past its timeout")
			}
		} else if owner := s.OwnerOf(st.Step); owner != c.ev.Actor {
			if v := c.l.compensatesFor(c.ev.Actor, owner, s, st); v != nil {
				return v
			}
		} else if v := sessionStanding(c.ev.Actor, s.Session, c.l.Sessions[s.Session], sagaWork); v != nil {
			return v
		}
		if err := SagaTransition(s.Saga.Clone(), st); err != nil {
			return inconsistent(Conflict, "%v", err)
		}
		return backoffViolation(s, st, c.at)
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		st := ev.SagaStep
		s := l.Sagas[st.Saga]
		_ = SagaTransition(&s.Saga, st)
		if st.Transition == event.SagaStart || st.Transition == event.SagaCompensating {
			if s.StepStarted == nil {
				s.StepStarted = map[string]event.Instant{}
			}
			s.StepStarted[st.Step] = ev.Time
		}
		if st.Transition == event.SagaFailed || st.Transition == event.SagaTimedOut {
			if s.StepFailed == nil {
				s.StepFailed = map[string]event.Instant{}
			}
			s.StepFailed[st.Step] = ev.Time
		}
		l.touch("saga/" + s.ID)
	},
}

// SagaTransition applies one reported transition to a saga; on error the
// saga is unchanged.
func SagaTransition(s *saga.Saga, st *event.SagaStep) error {
	var err error
	switch st.Transition {
	case event.SagaStart:
		err = s.StartStep(st.Step)
	case event.SagaSucceeded:
		err = s.StepSucceeded(st.Step)
	case event.SagaFailed:
		_, err = s.StepFailed(st.Step, st.Reason)
	case event.SagaTimedOut:
		_, err = s.StepTimedOut(st.Step)
	case event.SagaCompensating:
		err = s.StartCompensation(st.Step)
	case event.SagaCompensated:
		err = s.Compensated(st.Step)
	case event.SagaCompensationFailed:
		err = s.CompensationFailed(st.Step)
	default:
		err = fmt.Errorf("transition %q is unknown", st.Transition)
	}
	return err
}

// Policy is the latest version of a named policy.
type Policy struct {
	policy.Policy
	Version uint64 `json:"version"`
	SetAt   uint64 `json:"set_at"`
}

// policy.set: a human defines a policy or changes it; each change is the
// next version.
var policySetRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.write(ClaimRules)
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		if v := c.human(); v != nil {
			return v
		}
		p := c.ev.Policy
		var have uint64
		if old, ok := c.l.Policies[p.Policy.Name]; ok {
			have = old.Version
		}
		if p.Version != have+1 {
			return inconsistent(Conflict, "policy %s version %d does not follow version %d", p.Policy.Name, p.Version, have)
		}
		if _, err := policy.Compile(p.Policy); err != nil {
			return inconsistent(Invalid, "%v", err)
		}
		return nil
	})),
	apply: func(l *Ledger, index uint64, ev *event.Event) {
		p := ev.Policy
		l.Policies[p.Policy.Name] = &Policy{Policy: p.Policy, Version: p.Version, SetAt: index}
		l.compile(p.Policy)
		l.touch("policy/" + p.Policy.Name)
	},
}

func (l *Ledger) compile(p policy.Policy) {
	if c, err := policy.Compile(p); err == nil {
		l.compiled[p.Name] = c
	} else {
		delete(l.compiled, p.Name) // the policy gate then fails closed
	}
}

// policy.attached: a human who oversees an agent binds a policy to it (or
// unbinds it); root or an envelope's issuer binds one to the envelope and
// so to every envelope delegated from it.
var policyAttachedRule = &rule{
	claims: func(c *claimSet, ev *event.Event) {
		c.read(ClaimRules) // the policy must exist
		if a := ev.PolicyAttachment.Agent; a != "" {
			c.write(actorKey(a))
		} else {
			c.write(envelopeKey(ev.PolicyAttachment.Envelope))
		}
	},
	gates: byActor(newGate(GateAuthority, func(c *checker) *Violation {
		p := c.ev.PolicyAttachment
		if v := c.human(); v != nil {
			return v
		}
		if _, ok := c.l.Policies[p.Policy]; !ok && !p.Detach {
			return inconsistent(NotFound, "policy %s is not defined", p.Policy)
		}
		var attached []string
		if p.Agent != "" {
			a, v := c.l.oversee(c.ev.Actor, p.Agent)
			if v != nil {
				return v
			}
			attached = a.Policies
		} else {
			v, ok := c.l.Envelopes[p.Envelope]
			if !ok {
				return inconsistent(NotFound, "envelope %s does not exist", p.Envelope)
			}
			if c.ev.Actor != RootID && v.Issuer != c.ev.Actor {
				return refuse(Forbidden, "only root or envelope %s's issuer binds policies to it", v.ID)
			}
			attached = v.Policies
		}
		switch i := slices.Index(attached, p.Policy); {
		case p.Detach && i < 0:
			return inconsistent(Conflict, "policy %s is not attached", p.Policy)
		case !p.Detach && i >= 0:
			return inconsistent(Conflict, "policy %s is already attached", p.Policy)
		}
		return nil
	})),
	apply: func(l *Ledger, _ uint64, ev *event.Event) {
		p := ev.PolicyAttachment
		var list *[]string
		if p.Agent != "" {
			a := l.Actors[p.Agent]
			list = &a.Policies
			l.touchActor(a)
		} else {
			v := l.Envelopes[p.Envelope]
			list = &v.Policies
			l.touchEnvelope(v)
		}
		if p.Detach {
			*list = slices.DeleteFunc(*list, func(s string) bool { return s == p.Policy })
		} else {
			*list = append(*list, p.Policy)
		}
	},
}

// The rules of its kinds (rules.go).
func init() {
	rules[event.KindPolicyAttached] = policyAttachedRule
	rules[event.KindPolicySet] = policySetRule
	rules[event.KindSagaStarted] = sagaStartedRule
	rules[event.KindSagaStep] = sagaStepRule
}
