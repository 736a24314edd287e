package ledger

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
)

func (l *Ledger) human(index uint64, id string) (*Actor, error) {
	a, ok := l.Actors[id]
	if !ok || a.Kind != event.Human {
		return nil, inconsistent(index, "%s is not a human; only humans may do this", id)
	}
	return a, nil
}

func (l *Ledger) agent(index uint64, id string) (*Actor, error) {
	a, ok := l.Actors[id]
	if !ok || a.Kind != event.Agent {
		return nil, inconsistent(index, "%s is not an agent", id)
	}
	return a, nil
}

// overseer checks that by is root or the agent's creator.
func (l *Ledger) overseer(index uint64, by string, a *Actor) error {
	if _, err := l.human(index, by); err != nil {
		return err
	}
	if by != RootID && a.Creator != by {
		return inconsistent(index, "only root or %s's creator oversees %s", a.ID, a.ID)
	}
	return nil
}

func (l *Ledger) applyControl(index uint64, ev *event.Event) error {
	switch ev.Kind {
	case event.KindRingAssigned:
		r := ev.Ring
		a, err := l.agent(index, r.Agent)
		if err != nil {
			return err
		}
		if err := l.overseer(index, ev.Actor, a); err != nil {
			return err
		}
		rg := r.Ring
		a.Ring, a.TrustBP, a.Consensus = &rg, r.TrustBP, r.Consensus
		l.touchActor(a)
	case event.KindRingsConfigured:
		if ev.Actor != RootID {
			return inconsistent(index, "only root configures the rings")
		}
		l.RingConfig = *ev.RingConfig
		l.touch("meta")
	case event.KindActionRegistered:
		if _, err := l.human(index, ev.Actor); err != nil {
			return err
		}
		id := ev.Descriptor.Descriptor.ActionID
		d := &Descriptor{DescriptorRegistration: *ev.Descriptor, Version: 1, RegisteredAt: index}
		if old, ok := l.Descriptors[id]; ok {
			d.Version = old.Version + 1
		}
		l.Descriptors[id] = d
		l.touch("descriptor/" + id)
	case event.KindElevationGranted:
		return l.applyElevation(index, ev)
	case event.KindElevationEnded:
		e := ev.ElevationEnd
		v, ok := l.Elevations[e.ID]
		switch {
		case !ok || v.Agent != e.Agent:
			return inconsistent(index, "elevation %s of %s does not exist", e.ID, e.Agent)
		case v.Ended != "":
			return inconsistent(index, "elevation %s already %s", e.ID, v.Ended)
		case e.End == event.EndExpired && ev.Actor != event.KernelActor:
			return inconsistent(index, "only the kernel expires elevation %s", e.ID)
		case e.End == event.EndRevoked && ev.Actor != e.Agent:
			if _, err := l.human(index, ev.Actor); err != nil {
				return err
			}
		}
		v.Ended, v.EndedAt = e.End, index
		l.touch("elevation/" + v.ID)
	case event.KindSessionCreated:
		if _, ok := l.Sessions[ev.Session]; ok {
			return inconsistent(index, "session %s already exists", ev.Session)
		}
		created, _ := time.Parse(time.RFC3339Nano, ev.Time) // Encode checked the form
		se, err := session.New(ev.Session, ev.Actor, ev.SessionRecord.Config, created)
		if err != nil {
			return inconsistent(index, "%v", err)
		}
		s := &Session{Session: *se, CreatedIndex: index, DeltaHead: zeroHash}
		l.Sessions[s.ID] = s
		l.touch("session/" + s.ID)
	case event.KindSessionChanged:
		return l.applySessionChange(index, ev)
	case event.KindSessionDelta:
		s, ok := l.Sessions[ev.Session]
		if !ok {
			return inconsistent(index, "delta for unknown session %s", ev.Session)
		}
		if ev.Delta.ParentHash != s.DeltaHead {
			return inconsistent(index, "delta %s of session %s has parent %s, the chain's head is %s", ev.Delta.DeltaID, s.ID, ev.Delta.ParentHash, s.DeltaHead)
		}
		if _, dup := s.Turns[ev.Delta.TurnID]; dup {
			return inconsistent(index, "delta %s of session %s repeats turn %s", ev.Delta.DeltaID, s.ID, ev.Delta.TurnID)
		}
		files := maps.Clone(s.Files)
		if files == nil {
			files = map[string]string{}
		}
		if err := delta.ApplyChanges(files, ev.Delta.Changes); err != nil {
			return inconsistent(index, "delta %s of session %s: %v", ev.Delta.DeltaID, s.ID, err)
		}
		s.Files = files
		if s.Turns == nil {
			s.Turns = map[string]uint64{}
		}
		s.Turns[ev.Delta.TurnID] = index
		s.DeltaHead = ev.Delta.DeltaHash
		s.DeltaIndices = append(s.DeltaIndices, index)
		l.touch("session/" + s.ID)
	case event.KindQuarantineStarted:
		q := ev.Quarantine
		a, err := l.agent(index, q.Agent)
		if err != nil {
			return err
		}
		if err := l.overseer(index, ev.Actor, a); err != nil {
			return err
		}
		key := QuarantineKey(q.Agent, ev.Session)
		l.Quarantines[key] = &Quarantine{Quarantine: *q, Session: ev.Session}
		l.touch("quarantine/" + key)
	case event.KindQuarantineEnded:
		q := ev.Quarantine
		key := QuarantineKey(q.Agent, ev.Session)
		rec, ok := l.Quarantines[key]
		switch {
		case !ok || rec.Ended != "":
			return inconsistent(index, "%s is not quarantined (session %q)", q.Agent, ev.Session)
		case q.End == event.EndExpired && ev.Actor != event.KernelActor:
			return inconsistent(index, "only the kernel expires a quarantine")
		case q.End == event.EndReleased:
			if err := l.overseer(index, ev.Actor, l.Actors[q.Agent]); err != nil {
				return err
			}
		}
		rec.Ended = q.End
		l.touch("quarantine/" + key)
	case event.KindAgentKilled:
		return l.applyKill(index, ev)
	case event.KindSagaStarted:
		if _, ok := l.Sagas[ev.Saga.ID]; ok {
			return inconsistent(index, "saga %s already exists", ev.Saga.ID)
		}
		if _, err := l.agent(index, ev.Actor); err != nil {
			return err
		}
		s, err := saga.New(ev.Saga.ID, ev.Actor, ev.Session, ev.Saga.Steps)
		if err != nil {
			return inconsistent(index, "%v", err)
		}
		l.Sagas[s.ID] = &Saga{Saga: *s, StartedAt: index, StepStarted: map[string]string{}}
		l.touch("saga/" + s.ID)
	case event.KindSagaStep:
		return l.applySagaStep(index, ev)
	case event.KindPolicySet:
		if _, err := l.human(index, ev.Actor); err != nil {
			return err
		}
		p := ev.Policy
		var have uint64
		if old, ok := l.Policies[p.Policy.Name]; ok {
			have = old.Version
		}
		if p.Version != have+1 {
			return inconsistent(index, "policy %s version %d does not follow version %d", p.Policy.Name, p.Version, have)
		}
		l.Policies[p.Policy.Name] = &Policy{Policy: p.Policy, Version: p.Version, SetAt: index}
		l.touch("policy/" + p.Policy.Name)
	case event.KindPolicyAttached:
		return l.applyPolicyAttachment(index, ev)
	case event.KindSignalSent:
		return l.applySignal(index, ev)
	case event.KindSignalMasked:
		a, err := l.agent(index, ev.SignalMask.Agent)
		if err != nil {
			return err
		}
		if ev.Actor != a.ID {
			return inconsistent(index, "%s set %s's signal mask; an agent sets only its own", ev.Actor, a.ID)
		}
		a.SignalMask = slices.Clone(ev.SignalMask.Mask)
		l.touchActor(a)
	default:
		return inconsistent(index, "unknown kind %s", ev.Kind)
	}
	return nil
}

func (l *Ledger) applyElevation(index uint64, ev *event.Event) error {
	v := ev.Elevation
	if _, ok := l.Elevations[v.ID]; ok {
		return inconsistent(index, "elevation %s already exists", v.ID)
	}
	a, err := l.agent(index, v.Agent)
	if err != nil {
		return err
	}
	if ev.Actor != a.ID {
		if err := l.overseer(index, ev.Actor, a); err != nil {
			return err
		}
	}
	if v.AttestedBy != "" {
		if _, err := l.human(index, v.AttestedBy); err != nil {
			return err
		}
		if v.AttestedBy != ev.Actor {
			return inconsistent(index, "elevation %s is attested by %s but granted by %s", v.ID, v.AttestedBy, ev.Actor)
		}
	}
	if v.From != int(a.BaseRing()) {
		return inconsistent(index, "elevation %s starts from ring %d, %s is at ring %d", v.ID, v.From, a.ID, a.BaseRing())
	}
	// An elevation whose expiry has passed at this event's time no longer
	// holds, even before the kernel records its end: the kernel decided
	// with the same time.
	at, _ := time.Parse(time.RFC3339Nano, ev.Time) // Encode checked the form
	if old := l.ActiveElevation(a.ID, ev.Session, at); old != nil {
		return inconsistent(index, "elevation %s: %s already holds elevation %s in this session (duplicate_elevation)", v.ID, a.ID, old.ID)
	}
	l.Elevations[v.ID] = &Elevation{Elevation: *v, Session: ev.Session, GrantedAt: index}
	l.elevationsOf[a.ID] = append(l.elevationsOf[a.ID], v.ID)
	l.touch("elevation/" + v.ID)
	return nil
}

func (l *Ledger) applySessionChange(index uint64, ev *event.Event) error {
	s, ok := l.Sessions[ev.Session]
	if !ok {
		return inconsistent(index, "session %s does not exist", ev.Session)
	}
	c := ev.SessionChange
	byOwner := ev.Actor == s.Creator || ev.Actor == RootID || ev.Actor == event.KernelActor
	var err error
	switch c.Op {
	case event.SessionOpState:
		if !byOwner {
			return inconsistent(index, "%s changed the state of session %s; only its creator, root or the kernel may", ev.Actor, s.ID)
		}
		err = s.Transition(session.State(c.State))
	case event.SessionOpJoin:
		if !byOwner && ev.Actor != c.Agent {
			return inconsistent(index, "%s joined %s to session %s", ev.Actor, c.Agent, s.ID)
		}
		if _, e := l.agent(index, c.Agent); e != nil {
			return e
		}
		err = s.Join(session.Participant{AgentDID: c.Agent, Ring: c.Ring, EffScoreBP: uint16(c.EffScoreBP),
			SigmaRawBP: uint16(c.EffScoreBP), JoinedAt: ev.Time, IsActive: true}, uint16(c.EffScoreBP))
	case event.SessionOpLeave:
		if !byOwner && ev.Actor != c.Agent {
			return inconsistent(index, "%s removed %s from session %s", ev.Actor, c.Agent, s.ID)
		}
		err = s.Leave(c.Agent)
	case event.SessionOpGrant:
		if !byOwner {
			return inconsistent(index, "only session %s's creator or root grants cross-session reads", s.ID)
		}
		if _, ok := l.Sessions[c.Granted]; !ok {
			return inconsistent(index, "session %s is granted unknown session %s", s.ID, c.Granted)
		}
		err = s.GrantRead(c.Granted)
	case event.SessionOpSubstitute:
		if !byOwner {
			return inconsistent(index, "only session %s's creator or root registers a substitute", s.ID)
		}
		err = s.SetSubstitute(c.Agent)
	}
	if err != nil {
		return inconsistent(index, "session %s: %v", s.ID, err)
	}
	l.touch("session/" + s.ID)
	return nil
}

// checkRevoke checks that every listed envelope is the agent's.
func (l *Ledger) checkRevoke(index uint64, agent string, ids []string) error {
	for _, id := range ids {
		if v, ok := l.Envelopes[id]; !ok || v.Holder != agent {
			return inconsistent(index, "envelope %s is not %s's", id, agent)
		}
	}
	return nil
}

// revoke marks the listed envelopes revoked; one already revoked stays so,
// which keeps a kill and a concurrent revocation commutative.
func (l *Ledger) revoke(ids []string) {
	for _, id := range ids {
		if v := l.Envelopes[id]; !v.Revoked {
			v.Revoked = true
			l.touchEnvelope(v)
		}
	}
}

// freeze stops an agent (kill switch, terminating signal); a terminated
// agent stays terminated.
func (l *Ledger) freeze(a *Actor) {
	if a.Status != event.StatusTerminated {
		a.Status = event.StatusFrozen
	}
	l.touchActor(a)
}

func (l *Ledger) applyKill(index uint64, ev *event.Event) error {
	k := ev.Kill
	a, err := l.agent(index, k.Agent)
	if err != nil {
		return err
	}
	if err := l.overseer(index, ev.Actor, a); err != nil {
		return err
	}
	if err := l.checkRevoke(index, a.ID, k.Revoked); err != nil {
		return err
	}
	// Work on copies of the sagas, so that a refusal changes nothing.
	changed := map[string]*saga.Saga{}
	for _, h := range k.Handoffs {
		s, ok := changed[h.Saga]
		if !ok {
			cur, exists := l.Sagas[h.Saga]
			if !exists {
				return inconsistent(index, "kill %s hands off a step of unknown saga %s", k.KillID, h.Saga)
			}
			s = cur.Saga.Clone()
			changed[h.Saga] = s
		}
		var err error
		if h.Status == event.HandoffDone {
			err = s.HandOff(h.Step, h.To)
		} else if s.State == saga.Running {
			err = s.Abort("agent " + k.Agent + " killed (" + k.Reason + ")")
		}
		if err != nil {
			return inconsistent(index, "kill %s: %v", k.KillID, err)
		}
	}
	for id, s := range changed {
		l.Sagas[id].Saga = *s
		l.touch("saga/" + id)
	}
	l.revoke(k.Revoked)
	l.freeze(a)
	l.Kills++
	l.touch("meta")
	return nil
}

func (l *Ledger) applySagaStep(index uint64, ev *event.Event) error {
	st := ev.SagaStep
	s, ok := l.Sagas[st.Saga]
	if !ok {
		return inconsistent(index, "saga %s does not exist", st.Saga)
	}
	if ev.Actor != event.KernelActor && ev.Actor != s.OwnerOf(st.Step) {
		return inconsistent(index, "%s reported step %s of saga %s, which is %s's", ev.Actor, st.Step, s.ID, s.OwnerOf(st.Step))
	}
	if err := ApplySagaTransition(&s.Saga, st); err != nil {
		return inconsistent(index, "%v", err)
	}
	if st.Transition == event.SagaStart || st.Transition == event.SagaCompensating {
		if s.StepStarted == nil {
			s.StepStarted = map[string]string{}
		}
		s.StepStarted[st.Step] = ev.Time
	}
	l.touch("saga/" + s.ID)
	return nil
}

// ApplySagaTransition applies one reported transition to a saga; on error
// the saga is unchanged.
func ApplySagaTransition(s *saga.Saga, st *event.SagaStep) error {
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

func (l *Ledger) applyPolicyAttachment(index uint64, ev *event.Event) error {
	p := ev.PolicyAttachment
	if _, err := l.human(index, ev.Actor); err != nil {
		return err
	}
	if _, ok := l.Policies[p.Policy]; !ok && !p.Detach {
		return inconsistent(index, "policy %s does not exist", p.Policy)
	}
	var list *[]string
	if p.Agent != "" {
		a, err := l.agent(index, p.Agent)
		if err != nil {
			return err
		}
		list = &a.Policies
		l.touchActor(a)
	} else {
		v, ok := l.Envelopes[p.Envelope]
		if !ok {
			return inconsistent(index, "envelope %s does not exist", p.Envelope)
		}
		list = &v.Policies
		l.touchEnvelope(v)
	}
	i := slices.Index(*list, p.Policy)
	switch {
	case p.Detach && i < 0:
		return inconsistent(index, "policy %s is not attached", p.Policy)
	case p.Detach:
		*list = slices.Delete(*list, i, i+1)
	case i >= 0:
		return inconsistent(index, "policy %s is already attached", p.Policy)
	default:
		*list = append(*list, p.Policy)
	}
	return nil
}

func (l *Ledger) applySignal(index uint64, ev *event.Event) error {
	sig := ev.Signal
	a, err := l.agent(index, sig.Agent)
	if err != nil {
		return err
	}
	if ev.Actor != event.KernelActor {
		if err := l.overseer(index, ev.Actor, a); err != nil {
			return err
		}
	}
	switch sig.Effect {
	case event.EffectStop:
		a.Stopped = true
	case event.EffectContinue:
		a.Stopped = false
	case event.EffectTerminate:
		if err := l.checkRevoke(index, a.ID, sig.Revoked); err != nil {
			return err
		}
		l.revoke(sig.Revoked)
		l.freeze(a)
	case event.EffectQueue:
		a.Signals = append(a.Signals, QueuedSignal{Index: index, Signal: sig.Signal, Reason: sig.Reason})
		if len(a.Signals) > MaxQueuedSignals {
			a.Signals = slices.Delete(a.Signals, 0, len(a.Signals)-MaxQueuedSignals)
		}
	}
	l.touchActor(a)
	return nil
}

// expiredBy reports whether expires (an event's RFC 3339 time, which
// Encode has checked) is at or before at.
func expiredBy(expires string, at time.Time) bool {
	e, err := time.Parse(time.RFC3339Nano, expires)
	return err == nil && !at.Before(e)
}
