package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/killswitch"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/quarantine"
	"github.com/annal-dev/annal/kernel/internal/signal"
)

// KillRequest asks for an agent to be killed (§12).
type KillRequest struct {
	Reason  string
	Session string
	Details string
}

// Kill is the kill switch (§12). It hands the agent's in-flight saga steps
// to the session's registered substitute (or marks them for compensation),
// calls the agent runtime's termination callback with a timeout, and then
// records one agent.killed event, which freezes the agent and revokes its
// envelopes: in Annal "terminate" is the kernel refusing everything the
// agent does from then on. The event is written whatever the callback did
// (no callback, timeout, error, panic: terminated=false, §12.6). Only a
// human who oversees the agent may kill it.
func (k *Kernel) Kill(ctx context.Context, by *Actor, agentID string, req KillRequest) (*Receipt, *event.Kill, error) {
	const stage = "kill"
	if !killswitch.Reason(req.Reason).Valid() {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "kill reason %q is not one of %s (§12.2)", req.Reason, strings.Join(killswitch.Reasons(), ", "))
	}
	if err := checkReason(stage, req.Details); err != nil {
		return nil, nil, err
	}
	// Claim the agent and every saga it has a step running in, so that no
	// step report or status change lands between the plan and the event.
	k.mu.Lock()
	claims := []string{"actor/" + agentID}
	for id, s := range k.ledger.Sagas {
		if len(s.RunningStepsOf(agentID)) > 0 {
			claims = append(claims, "saga/"+id)
		}
	}
	k.mu.Unlock()
	release, err := k.claimAll(ctx, stage, claims)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	now := k.cfg.Now()
	killID, err := newEventID()
	if err != nil {
		return nil, nil, err
	}
	k.mu.Lock()
	a, err := k.oversee(stage, by, agentID)
	var (
		revoked  []string
		steps    []string
		sub      string
		eligible bool
	)
	if err == nil && a.Status == event.StatusTerminated {
		err = denyAt(stage, GateAuthority, ErrConflict, "%s is terminated already", a.ID)
	}
	if err == nil && req.Session != "" {
		se, ok := k.ledger.Sessions[req.Session]
		if !ok {
			err = denyAt(stage, GateSession, ErrNotFound, "session %s does not exist", req.Session)
		} else if se.Substitute != "" && se.Substitute != a.ID {
			sub = se.Substitute
			s := k.ledger.Actors[sub]
			eligible = s != nil && s.Active() && !s.Stopped && k.quarantined(sub, req.Session, now) == nil
		}
	}
	if err == nil {
		for _, id := range k.ledger.EnvelopesOf(a.ID) {
			if !k.ledger.Envelopes[id].Revoked {
				revoked = append(revoked, id)
			}
		}
		for id, s := range k.ledger.Sagas {
			// Only sagas claimed above: a step the agent started since is
			// left to time out, rather than handed off while a report of
			// it may be in flight.
			if (req.Session != "" && s.Session != req.Session) || !slices.Contains(claims, "saga/"+id) {
				continue
			}
			for _, step := range s.RunningStepsOf(a.ID) {
				steps = append(steps, id+"|"+step)
			}
		}
		slices.Sort(steps)
	}
	k.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	sw := killswitch.New(k.cfg.KillCallbackTimeout)
	if k.cfg.KillCallback != nil {
		sw.Register(a.ID, k.cfg.KillCallback)
	}
	if sub != "" {
		sw.RegisterSubstitute(req.Session, sub)
	}
	res := sw.Kill(ctx, killID, a.ID, req.Session, killswitch.Reason(req.Reason), steps, func(step, to string) error {
		if !eligible {
			return fmt.Errorf("substitute %s is not an active, unquarantined agent", to)
		}
		return nil
	}, now)
	kill := &event.Kill{KillID: killID, Agent: a.ID, Reason: req.Reason, Terminated: res.Terminated,
		Details: joinDetails(req.Details, res.Details), Revoked: revoked}
	for _, h := range res.Handoffs {
		sagaID, step, _ := strings.Cut(h.StepID, "|")
		out := event.Handoff{Saga: sagaID, Step: step, From: a.ID, Status: event.HandoffCompensation}
		if h.Status == killswitch.StatusHandedOff {
			out.To, out.Status = h.To, event.HandoffDone
			kill.HandoffSuccessCount++
		} else {
			kill.CompensationTriggered = true
		}
		kill.Handoffs = append(kill.Handoffs, out)
	}
	ev := &event.Event{V: event.Version, ID: killID, Time: event.FormatTime(now), Kind: event.KindAgentKilled,
		Actor: by.ID, Session: req.Session, Kill: kill}
	rc, err := k.appendControl(ctx, stage, ev, "", "")
	if err != nil {
		return nil, nil, err
	}
	k.forgetAgent(a.ID)
	return rc, kill, nil
}

func joinDetails(a, b string) string {
	s := strings.TrimSpace(a + "; " + b)
	s = strings.Trim(s, "; ")
	if len(s) > 2048 {
		s = s[:2048]
	}
	return strings.ToValidUTF8(s, "")
}

// forgetAgent drops what the kernel keeps in memory for an agent that can
// no longer act (its rate-limit bucket).
func (k *Kernel) forgetAgent(id string) {
	if k.limiter != nil {
		k.limiter.Forget(id)
	}
}

// QuarantineRequest asks for an agent to be quarantined (§13).
type QuarantineRequest struct {
	Session  string
	Reason   string
	Duration time.Duration
}

// Quarantine isolates an agent, in one session or (Session "") in all,
// until it is released or the duration (default 300 s) runs out. Unlike
// the reference implementation, Annal enforces it: the quarantine gate
// denies the agent's actions, and those of anyone acting under an envelope
// it delegated. Quarantining an agent already quarantined restarts the
// period.
func (k *Kernel) Quarantine(ctx context.Context, by *Actor, agentID string, req QuarantineRequest) (*Receipt, *ledger.Quarantine, error) {
	const stage = "quarantine"
	if !quarantine.Reason(req.Reason).Valid() {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "quarantine reason %q is not one of %s (§13.1)", req.Reason, strings.Join(quarantine.Reasons(), ", "))
	}
	if req.Duration < 0 || req.Duration > 30*24*time.Hour {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "duration %v is not between 0 (the default, %v) and 30 days", req.Duration, quarantine.DefaultDuration)
	}
	if req.Duration == 0 {
		req.Duration = quarantine.DefaultDuration
	}
	key := ledger.QuarantineKey(agentID, req.Session)
	rc, err := k.control(ctx, stage, []string{"quarantine/" + key}, func(now time.Time) (*event.Event, error) {
		if _, err := k.oversee(stage, by, agentID); err != nil {
			return nil, err
		}
		if req.Session != "" {
			if _, ok := k.ledger.Sessions[req.Session]; !ok {
				return nil, denyAt(stage, GateSession, ErrNotFound, "session %s does not exist", req.Session)
			}
		}
		return &event.Event{Kind: event.KindQuarantineStarted, Actor: by.ID, Session: req.Session, Quarantine: &event.Quarantine{
			Agent: agentID, Reason: req.Reason, StartedAt: event.FormatTime(now), ExpiresAt: event.FormatTime(now.Add(req.Duration))}}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	k.mu.Lock()
	q := *k.ledger.Quarantines[key]
	k.mu.Unlock()
	return rc, &q, nil
}

// Release ends an agent's quarantine (§13.4).
func (k *Kernel) Release(ctx context.Context, by *Actor, agentID, sessionID, reason string) (*Receipt, error) {
	const stage = "quarantine"
	if err := checkReason(stage, reason); err != nil {
		return nil, err
	}
	key := ledger.QuarantineKey(agentID, sessionID)
	return k.control(ctx, stage, []string{"quarantine/" + key}, func(now time.Time) (*event.Event, error) {
		if _, err := k.oversee(stage, by, agentID); err != nil {
			return nil, err
		}
		q, ok := k.ledger.Quarantines[key]
		if !ok || q.Ended != "" {
			return nil, denyAt(stage, GateQuarantine, ErrConflict, "%s is not quarantined (session %q)", agentID, sessionID)
		}
		return &event.Event{Kind: event.KindQuarantineEnded, Actor: by.ID, Session: sessionID,
			Quarantine: &event.Quarantine{Agent: agentID, End: event.EndReleased, Reason: reason}}, nil
	})
}

// Quarantines lists quarantine records (active and ended) of the agents
// the viewer oversees.
func (k *Kernel) Quarantines(viewer *Actor) []ledger.Quarantine {
	now := k.cfg.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []ledger.Quarantine{}
	for _, q := range k.ledger.Quarantines {
		a := k.ledger.Actors[q.Agent]
		if viewer.ID != RootID && viewer.ID != q.Agent && (a == nil || a.Creator != viewer.ID) {
			continue
		}
		c := *q
		if c.Ended == "" && expiredAt(c.ExpiresAt, now) {
			c.Ended = event.EndExpired // run out; the expiry loop will record it
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ledger.Quarantine) int { return strings.Compare(a.StartedAt, b.StartedAt) })
	return out
}

// Signal delivers a signal to an agent (Agent OS signal dispatch): SIGKILL,
// SIGPOLICY and SIGTRUST terminate whatever the agent's mask says (freeze
// and revoke its envelopes); a maskable signal the agent masks is queued
// for its own handler; otherwise SIGSTOP stops it, SIGCONT resumes it,
// SIGTERM terminates it and SIGINT is queued as a notice. Every delivery
// is a signal.sent event. Only a human who oversees the agent sends them;
// the kernel itself sends SIGPOLICY on a policy violation when the policy
// asks for it.
func (k *Kernel) Signal(ctx context.Context, by *Actor, agentID, name, reason string) (*Receipt, string, error) {
	const stage = "signal"
	sig, err := signal.Parse(name)
	if err != nil {
		return nil, "", denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	if err := checkReason(stage, reason); err != nil {
		return nil, "", err
	}
	var effect string
	rc, err := k.control(ctx, stage, []string{"actor/" + agentID}, func(time.Time) (*event.Event, error) {
		var a *Actor
		var err error
		if by.ID == event.KernelActor {
			a = k.ledger.Actors[agentID]
		} else {
			a, err = k.oversee(stage, by, agentID)
		}
		if err != nil {
			return nil, err
		}
		rec, err := k.deliver(a, sig, reason)
		if err != nil {
			return nil, denyAt(stage, GateActor, ErrConflict, "%v", err)
		}
		effect = rec.Effect
		return &event.Event{Kind: event.KindSignalSent, Actor: by.ID, Signal: rec}, nil
	})
	if err != nil {
		return nil, "", err
	}
	if effect == event.EffectTerminate {
		k.forgetAgent(agentID)
	}
	return rc, effect, nil
}

// deliver decides a signal's effect on an agent. The caller holds k.mu.
func (k *Kernel) deliver(a *Actor, sig signal.Signal, reason string) (*event.SignalRecord, error) {
	state := signal.Running
	switch {
	case !a.Active():
		state = signal.Terminated
	case a.Stopped:
		state = signal.Stopped
	}
	var mask signal.Mask
	for _, name := range a.SignalMask {
		s, err := signal.Parse(name)
		if err != nil {
			return nil, err
		}
		if mask, err = mask.With(s); err != nil {
			return nil, err
		}
	}
	effect, _, err := signal.Deliver(state, mask, sig)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.ID, err)
	}
	rec := &event.SignalRecord{Agent: a.ID, Signal: sig.String(), Effect: string(effect), Reason: reason}
	if rec.Effect == event.EffectTerminate {
		for _, id := range k.ledger.EnvelopesOf(a.ID) {
			if !k.ledger.Envelopes[id].Revoked {
				rec.Revoked = append(rec.Revoked, id)
			}
		}
	}
	return rec, nil
}

var kernelActor = &Actor{ActorRecord: event.ActorRecord{ID: event.KernelActor}}

// signalPolicyViolation sends SIGPOLICY from the kernel to an agent whose
// action broke a policy that asks for it.
func (k *Kernel) signalPolicyViolation(ctx context.Context, agentID, policyName, reason string) {
	if len(reason) > 900 {
		reason = reason[:900]
	}
	if _, _, err := k.Signal(ctx, kernelActor, agentID, "SIGPOLICY", strings.ToValidUTF8("policy "+policyName+": "+reason, "")); err != nil {
		k.logger.Warn("SIGPOLICY", "agent", agentID, "policy", policyName, "err", err)
	}
}

// SetSignalMask records the maskable signals an agent handles itself. An
// agent sets only its own mask; SIGKILL, SIGPOLICY and SIGTRUST cannot be
// masked.
func (k *Kernel) SetSignalMask(ctx context.Context, by *Actor, names []string) (*Receipt, error) {
	const stage = "signal"
	var mask signal.Mask
	for _, n := range names {
		s, err := signal.Parse(n)
		if err == nil {
			mask, err = mask.With(s)
		}
		if err != nil {
			return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
		}
	}
	list := maskNames(mask)
	return k.control(ctx, stage, []string{"actor/" + by.ID}, func(time.Time) (*event.Event, error) {
		a, err := k.liveActor(stage, by.ID)
		if err != nil {
			return nil, err
		}
		if a.IsHuman() {
			return nil, denyAt(stage, GateAuthority, ErrInvalid, "%s is a human: signals are for agents", a.ID)
		}
		return &event.Event{Kind: event.KindSignalMasked, Actor: a.ID, SignalMask: &event.SignalMask{Agent: a.ID, Mask: list}}, nil
	})
}

func maskNames(m signal.Mask) []string {
	out := []string{}
	for _, s := range signal.All() {
		if m.Has(s) {
			out = append(out, s.String())
		}
	}
	return out
}

// QueuedSignals returns the signals queued for the agent's own handler,
// oldest first (at most ledger.MaxQueuedSignals).
func (k *Kernel) QueuedSignals(viewer *Actor) []ledger.QueuedSignal {
	k.mu.Lock()
	defer k.mu.Unlock()
	a, ok := k.ledger.Actors[viewer.ID]
	if !ok {
		return nil
	}
	return append([]ledger.QueuedSignal{}, a.Signals...)
}
