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
// records one agent.killed event, which terminates the agent for good and
// revokes its envelopes. The event is written whatever the callback did (no
// callback, timeout, error, panic: terminated=false, §12.6). Only a human
// who oversees the agent may kill it; the rule is checked before the
// callback is called, and again when the kill is decided.
func (k *Kernel) Kill(ctx context.Context, by *Actor, agentID string, req KillRequest) (*Receipt, *event.Kill, error) {
	killID, err := newEventID()
	if err != nil {
		return nil, nil, err
	}
	plan := &killPlan{id: killID, by: by.ID, agent: agentID, req: req, at: event.At(k.cfg.Now())}
	if err := k.planKill(plan); err != nil {
		return nil, nil, err
	}
	res := plan.callRuntime(ctx, k.cfg)
	var kill *event.Kill
	d, err := k.decide(ctx, killStage, func(l *ledger.Ledger, at event.Instant) (*event.Event, error) {
		ev := plan.draft(l)
		kill = ev.Kill
		kill.Terminated, kill.Details = res.Terminated, joinDetails(req.Details, res.Details)
		plan.handOff(l, kill, res.Handoffs, at)
		ev.ID = killID
		return ev, nil
	})
	if err != nil {
		return nil, nil, err
	}
	k.forgetAgent(agentID)
	return receiptOf(d, "", ""), kill, nil
}

const killStage = "kill"

// killPlan is a kill as planned before the runtime's callback runs: the
// saga steps in flight to hand off, and the session's substitute.
type killPlan struct {
	id, by, agent string
	req           KillRequest
	at            event.Instant
	// steps are "<saga>|<step>", sorted; substitute takes them if
	// eligible (it may act in the session now).
	steps      []string
	substitute string
	eligible   bool
}

// draft is the kill's event on l, before the callback's outcome.
func (p *killPlan) draft(l *ledger.Ledger) *event.Event {
	kill := &event.Kill{KillID: p.id, Agent: p.agent, Reason: p.req.Reason}
	for _, id := range l.EnvelopesOf(p.agent) {
		if !l.Envelopes[id].Revoked {
			kill.Revoked = append(kill.Revoked, id)
		}
	}
	return &event.Event{V: event.Version, ID: p.id, Time: p.at, Kind: event.KindAgentKilled, Actor: p.by, Session: p.req.Session, Kill: kill}
}

// planKill checks the kill (its form, then its rule) before the callback
// runs, and finds the steps to hand off and whether the substitute may
// take them.
func (k *Kernel) planKill(p *killPlan) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, err := event.Encode(p.draft(k.ledger)); err != nil {
		return formError(killStage, "%s", strings.TrimPrefix(err.Error(), "event "+p.id+": "))
	}
	if err := k.ledger.Check(p.draft(k.ledger), ledger.Options{}); err != nil {
		return k.denial(killStage, p.draft(k.ledger), err)
	}
	if p.req.Session != "" {
		if se := k.ledger.Sessions[p.req.Session]; se.Substitute != "" && se.Substitute != p.agent {
			p.substitute = se.Substitute
			p.eligible = k.ledger.MayAct(p.substitute, p.req.Session, p.at) == nil
		}
	}
	for id, s := range k.ledger.Sagas {
		if p.req.Session != "" && s.Session != p.req.Session {
			continue
		}
		for _, step := range s.RunningStepsOf(p.agent) {
			p.steps = append(p.steps, id+"|"+step)
		}
	}
	slices.Sort(p.steps)
	return nil
}

// callRuntime runs the kill switch: the runtime's termination callback,
// with its timeout, and the hand-off of the planned steps.
func (p *killPlan) callRuntime(ctx context.Context, cfg Config) killswitch.Result {
	sw := killswitch.New(cfg.KillCallbackTimeout)
	if cfg.KillCallback != nil {
		sw.Register(p.agent, cfg.KillCallback)
	}
	if p.substitute != "" {
		sw.RegisterSubstitute(p.req.Session, p.substitute)
	}
	return sw.Kill(ctx, p.id, p.agent, p.req.Session, killswitch.Reason(p.req.Reason), p.steps, func(step, to string) error {
		if !p.eligible {
			return fmt.Errorf("substitute %s is not an active, unquarantined agent", to)
		}
		return nil
	}, p.at.Time)
}

// handOff records in kill what became of each step the kill switch handed
// off, as l stands when the kill is decided: a step that moved on since
// the plan is no longer in flight, and a substitute that may no longer act
// takes nothing (the step is left for compensation).
func (p *killPlan) handOff(l *ledger.Ledger, kill *event.Kill, handoffs []killswitch.Handoff, at event.Instant) {
	for _, h := range handoffs {
		sagaID, step, _ := strings.Cut(h.StepID, "|")
		if s, ok := l.Sagas[sagaID]; !ok || !slices.Contains(s.RunningStepsOf(p.agent), step) {
			continue
		}
		out := event.Handoff{Saga: sagaID, Step: step, From: p.agent, Status: event.HandoffCompensation}
		if h.Status == killswitch.StatusHandedOff && l.MayAct(h.To, p.req.Session, at) == nil {
			out.To, out.Status = h.To, event.HandoffDone
			kill.HandoffSuccessCount++
		} else {
			kill.CompensationTriggered = true
		}
		kill.Handoffs = append(kill.Handoffs, out)
	}
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
	if req.Duration == 0 {
		req.Duration = quarantine.DefaultDuration
	}
	d, err := k.decide(ctx, stage, func(_ *ledger.Ledger, now event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindQuarantineStarted, Actor: by.ID, Session: req.Session, Quarantine: &event.Quarantine{
			Agent: agentID, Reason: req.Reason, StartedAt: now, ExpiresAt: now.Add(req.Duration)}}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	// What the event recorded, from the ledger once it is folded (it is,
	// unless the kernel stopped right after writing it).
	q := ledger.Quarantine{Quarantine: *d.ev.Quarantine, Session: req.Session}
	k.mu.Lock()
	if folded, ok := k.ledger.Quarantines[ledger.QuarantineKey(agentID, req.Session)]; ok {
		q = *folded
	}
	k.mu.Unlock()
	return receiptOf(d, "", ""), &q, nil
}

// Release ends an agent's quarantine (§13.4).
func (k *Kernel) Release(ctx context.Context, by *Actor, agentID, sessionID, reason string) (*Receipt, error) {
	const stage = "quarantine"
	return k.decideControl(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindQuarantineEnded, Actor: by.ID, Session: sessionID,
			Quarantine: &event.Quarantine{Agent: agentID, End: event.EndReleased, Reason: reason}}, nil
	})
}

// Quarantines lists quarantine records (active and ended) of the agents
// the viewer oversees.
func (k *Kernel) Quarantines(viewer *Actor) []ledger.Quarantine {
	now := event.At(k.cfg.Now())
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []ledger.Quarantine{}
	for _, q := range k.ledger.Quarantines {
		a := k.ledger.Actors[q.Agent]
		if viewer.ID != RootID && viewer.ID != q.Agent && (a == nil || a.Creator != viewer.ID) {
			continue
		}
		c := *q
		if c.Ended == "" && c.ExpiresAt.ReachedBy(now) {
			c.Ended = event.EndExpired // run out; the expiry loop will record it
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ledger.Quarantine) int { return a.StartedAt.Compare(b.StartedAt.Time) })
	return out
}

// Signal delivers a signal to an agent (Agent OS signal dispatch): SIGKILL,
// SIGPOLICY and SIGTRUST terminate whatever the agent's mask says (freeze
// and revoke its envelopes); a maskable signal the agent masks is queued
// for its own handler; otherwise SIGSTOP stops it, SIGCONT resumes it,
// SIGTERM terminates it and SIGINT is queued as a notice. Every delivery
// is a signal.sent event. Only a human who oversees the agent sends them;
// the kernel itself sends SIGKILL on a policy violation when the policy
// asks for it (signalPolicyViolation).
func (k *Kernel) Signal(ctx context.Context, by *Actor, agentID, name, reason string) (*Receipt, string, error) {
	const stage = "signal"
	sig, err := signal.Parse(name)
	if err != nil {
		return nil, "", denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	var effect string
	d, err := k.decide(ctx, stage, func(l *ledger.Ledger, _ event.Instant) (*event.Event, error) {
		rec := &event.SignalRecord{Agent: agentID, Signal: sig.String(), Reason: reason}
		if a, ok := l.Actors[agentID]; ok {
			var err error
			if rec.Effect, rec.Revoked, err = l.Deliver(a, sig); err != nil {
				return nil, denyAt(stage, GateActor, ErrConflict, "%v", err)
			}
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
	return receiptOf(d, "", ""), effect, nil
}

var kernelActor = &Actor{ActorRecord: event.ActorRecord{ID: event.KernelActor}}

// violationSignal is what the kernel sends an agent that breaks a policy
// asking for it: SIGKILL, as seed 002's kernel does ("Policy Violation →
// SIGKILL"; ledger.RulesPolicyKill).
const violationSignal = "SIGKILL"

// signalPolicyViolation sends violationSignal from the kernel to an agent
// whose action broke a policy that asks for it, and returns the signal it
// sent ("" if none was: the agent was already gone, or the write failed).
func (k *Kernel) signalPolicyViolation(ctx context.Context, agentID, policyName, reason string) string {
	if len(reason) > 900 {
		reason = reason[:900]
	}
	if _, _, err := k.Signal(ctx, kernelActor, agentID, violationSignal, strings.ToValidUTF8("policy "+policyName+": "+reason, "")); err != nil {
		k.logger.Warn("policy violation signal", "signal", violationSignal, "agent", agentID, "policy", policyName, "err", err)
		return ""
	}
	return violationSignal
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
	return k.decideControl(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindSignalMasked, Actor: by.ID, SignalMask: &event.SignalMask{Agent: by.ID, Mask: list}}, nil
	})
}

func maskNames(m signal.Mask) []string {
	out := []string{}
	for _, s := range signal.All() {
		if m.Has(s) {
			out = append(out, s.String())
		}
	}
	slices.Sort(out) // the event lists them by name, not by number
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
