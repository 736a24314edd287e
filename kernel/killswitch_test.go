package kernel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/killswitch"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
)

// §12 through the kernel: a kill freezes the agent, revokes its
// envelopes, hands its running saga step to the session's substitute, and
// is recorded whatever the callback does (§12.6).
func TestSpec12_KillSwitch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		callback   killswitch.Callback
		terminated bool
	}{
		{"callback confirms", func(context.Context, string, string, killswitch.Reason) error { return nil }, true},
		{"no callback", nil, false},
		{"callback fails", func(context.Context, string, string, killswitch.Reason) error { return errors.New("runtime gone") }, false},
		{"callback panics", func(context.Context, string, string, killswitch.Reason) error { panic("boom") }, false},
		{"callback times out", func(ctx context.Context, _, _ string, _ killswitch.Reason) error { <-ctx.Done(); return ctx.Err() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := openGov(t, func(c *Config) { c.KillCallback, c.KillCallbackTimeout = tc.callback, 50*time.Millisecond })
			ctx := context.Background()
			a := g.ringAgent(ptr(0.8), false, "workspace/**:mutate")
			sub := g.ringAgent(ptr(0.8), false)
			g.activeSession("s", session.DefaultConfig(), a, sub)
			g.changeSession(g.root, "s", SessionChange{Op: event.SessionOpSubstitute, Agent: sub.ID})
			if _, _, err := g.StartSaga(ctx, a, "deploy", "s", []saga.StepSpec{saga.NewStepSpec("build", "build", "clean"), saga.NewStepSpec("ship", "ship", "unship")}); err != nil {
				t.Fatal(err)
			}
			if _, err := g.ReportSagaStep(ctx, a, "deploy", SagaReport{Step: "build", Transition: event.SagaStart}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := g.Kill(ctx, a, a.ID, KillRequest{Reason: "manual"}); !errors.Is(err, ErrForbidden) {
				t.Fatalf("an agent killed itself through the API: %v", err)
			}
			rc, kill, err := g.Kill(ctx, g.root, a.ID, KillRequest{Reason: "behavioral_drift", Session: "s", Details: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if kill.Terminated != tc.terminated || g.kindAt(rc.Index) != event.KindAgentKilled {
				t.Fatalf("terminated %v (want %v), event %s", kill.Terminated, tc.terminated, g.kindAt(rc.Index))
			}
			if len(kill.Handoffs) != 1 || kill.Handoffs[0].To != sub.ID || kill.HandoffSuccessCount != 1 || kill.CompensationTriggered {
				t.Fatalf("handoffs %+v", kill)
			}
			if len(kill.Revoked) != 1 {
				t.Fatalf("revoked %v", kill.Revoked)
			}
			after, _ := g.Actor(a.ID)
			if after.Status != event.StatusTerminated {
				t.Fatalf("killed agent is %s, want terminated", after.Status)
			}
			if _, err := g.submit(a, event.Mutate, "workspace/x"); denialOf(t, err).Gate != GateActor {
				t.Fatalf("killed agent acted: %v", err)
			}
			// The substitute now reports the step; the killed agent cannot.
			if _, err := g.ReportSagaStep(ctx, sub, "deploy", SagaReport{Step: "build", Transition: event.SagaSucceeded}); err != nil {
				t.Fatalf("substitute's report: %v", err)
			}
			if _, _, err := g.Kill(ctx, g.root, a.ID, KillRequest{Reason: "bogus"}); !errors.Is(err, ErrInvalid) {
				t.Fatalf("unknown kill reason: %v", err)
			}
		})
	}
}

// jobAtItsThirdStep starts the saga "job" (steps one, two, three) of a new
// agent, which completes one and two and starts three; it returns the
// agent.
func (g *govKernel) jobAtItsThirdStep() *Actor {
	g.t.Helper()
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false)
	steps := []saga.StepSpec{saga.NewStepSpec("one", "a", "undo-a"), saga.NewStepSpec("two", "b", "undo-b"), saga.NewStepSpec("three", "c", "undo-c")}
	if _, _, err := g.StartSaga(ctx, a, "job", "", steps); err != nil {
		g.t.Fatal(err)
	}
	for _, r := range []SagaReport{{"one", event.SagaStart, ""}, {"one", event.SagaSucceeded, ""}, {"two", event.SagaStart, ""}, {"two", event.SagaSucceeded, ""}, {"three", event.SagaStart, ""}} {
		if _, err := g.ReportSagaStep(ctx, a, "job", r); err != nil {
			g.t.Fatal(err)
		}
	}
	return a
}

// §12.3: without a substitute, the killed agent's running steps are
// marked for compensation, and the saga compensates in reverse order.
func TestSpec12_3_KillWithoutSubstituteCompensates(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.jobAtItsThirdStep()
	var calls atomic.Int32
	g.cfg.KillCallback = func(context.Context, string, string, killswitch.Reason) error { calls.Add(1); return nil }
	_, kill, err := g.Kill(ctx, g.root, a.ID, KillRequest{Reason: "ring_breach"})
	if err != nil {
		t.Fatal(err)
	}
	if !kill.CompensationTriggered || kill.HandoffSuccessCount != 0 || calls.Load() != 1 {
		t.Fatalf("kill %+v, callback called %d times", kill, calls.Load())
	}
	v, err := g.SagaStatus("job")
	if err != nil {
		t.Fatal(err)
	}
	if v.State != saga.Compensating || v.NextCompensation != "two" {
		t.Fatalf("saga %s, next compensation %q; want compensating, two", v.State, v.NextCompensation)
	}
}

// §15: retries, then reverse-order compensation; out-of-order reports are
// refused; a step past its timeout is failed by the kernel.
func TestSpec15_3_SagaThroughTheKernel(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false)
	other := g.ringAgent(ptr(0.8), false)
	steps := []saga.StepSpec{saga.NewStepSpec("reserve", "reserve", "release"), saga.NewStepSpec("charge", "charge", "refund"), saga.NewStepSpec("ship", "ship", "recall")}
	steps[2].MaxRetries, steps[2].TimeoutSeconds = 1, 30
	if _, _, err := g.StartSaga(ctx, a, "order-1", "", steps); err != nil {
		t.Fatal(err)
	}
	report := func(by *Actor, step, tr string) error {
		_, err := g.ReportSagaStep(ctx, by, "order-1", SagaReport{Step: step, Transition: tr, Reason: "test"})
		return err
	}
	for _, r := range [][2]string{{"reserve", "started"}, {"reserve", "succeeded"}, {"charge", "started"}, {"charge", "succeeded"}} {
		if err := report(a, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := report(a, "reserve", "started"); !errors.Is(err, ErrConflict) {
		t.Fatalf("a finished step restarted: %v", err)
	}
	if err := report(other, "ship", "started"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("another agent reported a step: %v", err)
	}
	// Attempt 1 times out (the kernel fails it), attempt 2 fails: retries
	// exhausted, compensation runs in reverse order.
	if err := report(a, "ship", "started"); err != nil {
		t.Fatal(err)
	}
	g.clock.advance(31 * time.Second)
	g.expireControl(ctx)
	v, _ := g.SagaStatus("order-1")
	if st := v.Step("ship"); st.State != saga.StepFailed || v.State != saga.Running || v.RetryAfterSeconds != 1 {
		t.Fatalf("after a timeout: step %s, saga %s, retry after %v", st.State, v.State, v.RetryAfterSeconds)
	}
	g.clock.advance(time.Second) // the retry's backoff (§15.2)
	if err := report(a, "ship", "started"); err != nil {
		t.Fatal(err)
	}
	if err := report(a, "ship", "failed"); err != nil {
		t.Fatal(err)
	}
	v, _ = g.SagaStatus("order-1")
	if v.State != saga.Compensating || v.NextCompensation != "charge" {
		t.Fatalf("saga %s, next %q", v.State, v.NextCompensation)
	}
	if err := report(a, "reserve", "compensating"); !errors.Is(err, ErrConflict) {
		t.Fatalf("compensation out of reverse order: %v", err)
	}
	for _, step := range []string{"charge", "reserve"} {
		if err := report(a, step, "compensating"); err != nil {
			t.Fatal(err)
		}
		if err := report(a, step, "compensated"); err != nil {
			t.Fatal(err)
		}
	}
	v, _ = g.SagaStatus("order-1")
	if v.State != saga.Compensated {
		t.Fatalf("saga ended %s", v.State)
	}
}

// §13 enforced at runtime: a quarantined agent is denied until release or
// expiry — also when it acts under an envelope delegated to it, and when
// another agent acts under an envelope the quarantined one delegated.
func TestAttack_QuarantinedAgentThroughDelegatedEnvelope(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	q := g.ringAgent(ptr(0.8), false, "workspace/**:mutate")
	friend := g.ringAgent(ptr(0.8), false, "workspace/**:mutate")
	// friend delegates to q, and q delegates to friend.
	fv := g.Envelopes(friend)[0]
	toQ, _, err := g.IssueEnvelope(ctx, friend, EnvelopeRequest{Holder: q.ID, Parent: fv.ID, Budget: 100, Grants: grants("workspace/**:mutate")})
	if err != nil {
		t.Fatal(err)
	}
	qv := g.Envelopes(q)[0]
	if qv.ID == toQ.ID {
		qv = g.Envelopes(q)[1]
	}
	fromQ, _, err := g.IssueEnvelope(ctx, q, EnvelopeRequest{Holder: friend.ID, Parent: qv.ID, Budget: 100, Grants: grants("workspace/**:mutate")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Quarantine(ctx, g.root, q.ID, QuarantineRequest{Reason: "behavioral_drift", Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	act := func(a *Actor, env string) error {
		_, err := g.Submit(ctx, a, ActionRequest{Type: event.Mutate, Target: "workspace/x", Envelope: env})
		return err
	}
	g.wantGate(act(q, ""), GateQuarantine)
	g.wantGate(act(q, toQ.ID), GateQuarantine)
	g.wantGate(act(friend, fromQ.ID), GateQuarantine)
	if err := act(friend, fv.ID); err != nil {
		t.Fatalf("friend under its own envelope: %v", err)
	}
	if _, err := g.submit(q, event.Observe, "workspace/x"); denialOf(t, err).Gate != GateQuarantine {
		t.Fatalf("a quarantined agent observed: %v", err)
	}
	// Expiry by the clock frees it at once; the tick records the end.
	g.clock.advance(time.Minute)
	if err := act(q, ""); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	g.expireControl(ctx)
	if qs := g.Quarantines(g.root); len(qs) != 1 || qs[0].Ended != event.EndExpired {
		t.Fatalf("quarantines %+v", qs)
	}
	// A session-scoped quarantine holds in that session only; release ends it.
	g.activeSession("s", session.DefaultConfig(), q)
	if _, _, err := g.Quarantine(ctx, g.root, q.ID, QuarantineRequest{Reason: "manual", Session: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Submit(ctx, q, ActionRequest{Type: event.Observe, Target: "workspace/x", Session: "s"}); denialOf(t, err).Gate != GateQuarantine {
		t.Fatalf("quarantined in s, acted in s: %v", err)
	}
	if err := act(q, ""); err != nil {
		t.Fatalf("quarantined in s only, acting outside: %v", err)
	}
	if _, _, err := g.Quarantine(ctx, friend, q.ID, QuarantineRequest{Reason: "manual"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("an agent quarantined another: %v", err)
	}
	if _, err := g.Release(ctx, g.root, q.ID, "s", "cleared"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Submit(ctx, q, ActionRequest{Type: event.Observe, Target: "workspace/x", Session: "s"}); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if _, err := g.Release(ctx, g.root, q.ID, "s", ""); !errors.Is(err, ErrConflict) {
		t.Fatalf("release of no quarantine: %v", err)
	}
}

// Agent OS signals through the kernel: SIGSTOP stops, SIGCONT resumes, a
// masked SIGTERM is queued for the agent, SIGKILL/SIGPOLICY/SIGTRUST are
// not maskable and terminate (freeze and revoke).
func TestAgentOS_SignalsThroughTheKernel(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.ringAgent(ptr(0.8), false, "workspace/**:mutate")
	send := func(sig string) string {
		t.Helper()
		_, effect, err := g.Signal(ctx, g.root, a.ID, sig, "test")
		if err != nil {
			t.Fatalf("%s: %v", sig, err)
		}
		return effect
	}
	if e := send("SIGSTOP"); e != event.EffectStop {
		t.Fatalf("SIGSTOP: %s", e)
	}
	if _, err := g.submit(a, event.Mutate, "workspace/x"); denialOf(t, err).Gate != GateActor {
		t.Fatalf("stopped agent acted: %v", err)
	}
	if e := send("SIGCONT"); e != event.EffectContinue {
		t.Fatalf("SIGCONT: %s", e)
	}
	if _, err := g.submit(a, event.Mutate, "workspace/x"); err != nil {
		t.Fatalf("after SIGCONT: %v", err)
	}
	if _, err := g.SetSignalMask(ctx, a, []string{"SIGKILL"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SIGKILL masked: %v", err)
	}
	// Any set of maskable signals, in any order: the event lists them by
	// name, which is not their numbers' order (SIGSTOP is 19, SIGCONT 18).
	if _, err := g.SetSignalMask(ctx, a, []string{"SIGSTOP", "SIGCONT", "SIGINT"}); err != nil {
		t.Fatalf("mask SIGSTOP, SIGCONT and SIGINT: %v", err)
	}
	if _, err := g.SetSignalMask(ctx, a, []string{"SIGTERM", "SIGINT"}); err != nil {
		t.Fatal(err)
	}
	if e := send("SIGTERM"); e != event.EffectQueue {
		t.Fatalf("masked SIGTERM: %s", e)
	}
	if qs := g.QueuedSignals(a); len(qs) != 1 || qs[0].Signal != "SIGTERM" {
		t.Fatalf("queued %+v", qs)
	}
	if _, err := g.submit(a, event.Mutate, "workspace/x"); err != nil {
		t.Fatalf("after a masked SIGTERM: %v", err)
	}
	if _, _, err := g.Signal(ctx, a, a.ID, "SIGKILL", ""); !errors.Is(err, ErrForbidden) {
		t.Fatalf("an agent signalled: %v", err)
	}
	if e := send("SIGTRUST"); e != event.EffectTerminate {
		t.Fatalf("SIGTRUST: %s", e)
	}
	if _, err := g.submit(a, event.Mutate, "workspace/x"); denialOf(t, err).Gate != GateActor {
		t.Fatalf("terminated agent acted: %v", err)
	}
	for _, v := range g.Envelopes(g.root) {
		if v.Holder == a.ID && !v.Revoked {
			t.Fatalf("envelope %s survived SIGTRUST", v.ID)
		}
	}
	if _, _, err := g.Signal(ctx, g.root, a.ID, "SIGHUP", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown signal: %v", err)
	}
}

// §12.3 and §15.3 together: a kill without a substitute leaves the
// killed agent's saga compensating, and the agent, terminated, can report
// nothing. The human who oversees it (root or its creator) then reports
// the compensations, in reverse order, so that the orchestrator (annal
// sagas run with that human's credential) can run them; nobody else may,
// nor may the overseer while the agent lives, nor anything but a
// compensation.
func TestSpec004_15_3_OverseerCompensatesAKilledAgentsSaga(t *testing.T) {
	g := openGov(t)
	ctx := context.Background()
	a := g.jobAtItsThirdStep()
	made, err := g.CreateAgent(ctx, g.root, ActorRequest{Kind: event.Human, Name: "stranger", Purpose: "oversees others"})
	if err != nil {
		t.Fatal(err)
	}
	stranger := made.Actor
	report := func(by *Actor, step, tr string) error {
		_, err := g.ReportSagaStep(ctx, by, "job", SagaReport{Step: step, Transition: tr, Reason: "after the kill"})
		return err
	}
	if err := report(g.root, "two", event.SagaCompensating); !errors.Is(err, ErrForbidden) {
		t.Fatalf("root compensated a living agent's step: %v", err)
	}
	if _, _, err := g.Kill(ctx, g.root, a.ID, KillRequest{Reason: "ring_breach"}); err != nil {
		t.Fatal(err)
	}
	if err := report(stranger, "two", event.SagaCompensating); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a human who does not oversee the agent compensated its step: %v", err)
	}
	if err := report(g.root, "one", event.SagaCompensating); err == nil {
		t.Fatal("compensation out of reverse order")
	}
	for _, r := range [][2]string{{"two", event.SagaCompensating}, {"two", event.SagaCompensated}, {"one", event.SagaCompensating}, {"one", event.SagaCompensated}} {
		if err := report(g.root, r[0], r[1]); err != nil {
			t.Fatalf("root's %s of %s: %v", r[1], r[0], err)
		}
	}
	v, err := g.SagaStatus("job")
	if err != nil {
		t.Fatal(err)
	}
	if v.State != saga.Compensated {
		t.Fatalf("saga %s after its compensations, want %s", v.State, saga.Compensated)
	}
}
