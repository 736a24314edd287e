package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// The races: operations that send two or more requests at the same
// instant, on objects set up for them, so that the kernel decides them
// together. Each goroutine of a race draws nothing from the worker's
// source: every choice is made before the start.

// together runs fs at once, released by one signal, and waits for all.
func together(fs ...func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f()
		}()
	}
	close(start)
	wg.Wait()
}

// raceShares: root creates a human with one or two shares of production
// to give, and the human sends 8 to 50 creations of agents with a share
// of 1 each at once. No more of them may succeed than it had shares.
func (wk *worker) raceShares() {
	share := uint64(oneOf(wk, 1, 1, 2))
	req := api.AgentRequest{Kind: "human", Name: wk.w.name("human"), Purpose: "workload", Grants: humanGrants, Energy: 1 << 30, Share: &share}
	p := wk.create(wk.w.root, req, 0, false)
	if p == nil {
		return
	}
	c := p.client(wk.w, wk.rng)
	n := 8 + wk.rng.IntN(43)
	var made atomic.Int64
	fs := make([]func(), n)
	for i := range fs {
		name := fmt.Sprintf("a%d", i)
		fs[i] = func() {
			one := uint64(1)
			if wk.createWith(c, p, api.AgentRequest{Name: name, Purpose: "x", Share: &one}) != nil {
				made.Add(1)
			}
		}
	}
	together(fs...)
	if m := uint64(made.Load()); m > share {
		wk.r.failure("race.shares", fmt.Sprintf("%d creations with share 1 by %s", n, p.id),
			fmt.Sprintf("human %s had a share of %d to give and created %d agents with a share of 1 each", p.id, share, m))
	}
	wk.r.count("race.shares", "ok")
}

// createWith sends a creation with the client chosen, and adds the agent
// made to the world (no envelope: races call it from goroutines).
func (wk *worker) createWith(c *client.Client, by *actor, req api.AgentRequest) *actor {
	ctx, cancel := wk.ctx()
	defer cancel()
	na, err := c.CreateAgent(ctx, req)
	problem := ""
	if err == nil {
		if na.ID == "" || na.Credential == "" || na.Creator != by.id || na.Index == 0 {
			problem = fmt.Sprintf("creation answer %+v is not the actor asked for", *na)
		} else {
			wk.r.addAck(ack{op: "agent.create", index: na.Index, actors: actors(by.id), kinds: kinds("actor.created"), subject: na.ID})
		}
	}
	if out := wk.r.record("agent.create", fmt.Sprintf("agent %s by %s", req.Name, by.id), err, problem, "ok"); out != "ok" {
		return nil
	}
	skey, vkey, err := newKey(req.Name)
	if err != nil {
		return nil
	}
	a, err := newActor(wk.w.url, na.ID, req.Name, na.Credential, false, by.id, skey, vkey)
	if err != nil {
		return nil
	}
	wk.w.addAgent(a)
	return a
}

// heldAction sets up a pending hold: an agent of creator (any agent when
// creator is nil), an envelope with hold rules issued by its creator, and
// an action the rules hold. It returns nil when any step is refused.
func (wk *worker) heldAction(creator *actor) (*actor, *hold) {
	var a *actor
	if creator != nil {
		a = wk.w.agentOf(wk.rng, creator.id)
		if a == nil {
			trust := 0.8
			a = wk.create(creator, api.AgentRequest{Name: wk.w.name("agent"), Purpose: "workload", Grants: agentGrants, Energy: 1_000_000, Trust: &trust}, trust, false)
		}
	} else {
		a = wk.w.agent(wk.rng)
	}
	if a == nil {
		return nil, nil
	}
	env := wk.w.envelopeOf(wk.rng, a.id, true)
	if env == nil || env.parent != "" {
		by := wk.w.actorByID(a.creator)
		if by == nil {
			return nil, nil
		}
		env = wk.sendEnvelope("envelope.issue", by, api.EnvelopeRequest{Holder: a.id, Budget: 1_000_000, Grants: envelopeGrants, HoldOn: holdRules})
		if env == nil {
			return nil, nil
		}
	}
	req := api.ActionRequest{Type: "mutate", Target: "workspace/release/" + oneOf(wk, "x", "y"), Envelope: env.id, Payload: json.RawMessage(`{"release":true}`)}
	rc, err := wk.submitWith(a.client(wk.w, wk.rng), "act.held", a, req, false)
	if err != nil || rc.Status != "held" {
		return nil, nil
	}
	return a, &hold{id: rc.HoldID, agent: a.id, envelope: rc.Envelope}
}

// raceApproveVsKey: a human approves a hold unsigned while root turns on
// require_signed for that human. Either the key comes first and the
// approval is refused, or the approval comes first; never an approval
// logged after the key that requires its signature.
func (wk *worker) raceApproveVsKey() {
	h := wk.w.humanNotRoot(wk.rng)
	if h == nil {
		wk.createHuman()
		return
	}
	root := wk.w.root
	if wk.keyChange(root, h, true, false) != "ok" {
		return
	}
	_, hd := wk.heldAction(h)
	if hd == nil {
		return
	}
	hc, rc := h.plain, root.plain
	together(
		func() { wk.answerWith(hc, h, hd, "approve") },
		func() {
			req := api.SigningKeyRequest{Key: h.vkey, RequireSigned: true, Reason: "workload race"}
			_, out := wk.ctlWith(rc, "key.set", fmt.Sprintf("key of %s on=true require_signed=true", h.id), root, "actor.key",
				func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
					return c.SetSigningKey(ctx, h.id, req)
				})
			if out == "ok" {
				wk.w.setKey(h, true, true)
			}
		},
	)
	if !wk.chance(4) {
		wk.keyChange(root, h, true, false)
	}
	wk.r.count("race.approve-vs-key", "ok")
}

// raceKillHandoff: root kills an agent whose saga step is running in a
// session whose substitute is, at the same instant, frozen, quarantined in
// the session, stopped by SIGSTOP, made to leave, or killed.
func (wk *worker) raceKillHandoff() {
	root := wk.w.root
	a, b := wk.w.agent(wk.rng), wk.w.agent(wk.rng)
	if a == nil || b == nil || a == b {
		return
	}
	s := wk.handoffSession(a, b)
	if s == nil {
		return
	}
	g := wk.sagaOf(a, s.id, 2)
	if g == nil || wk.step1(a, g, "step1", "started") != "ok" {
		return
	}
	rootC, bc := root.plain, b.client(wk.w, wk.rng)
	kill := wk.killMove(rootC, a, s.id, fmt.Sprintf("kill %s in %s (substitute %s)", a.id, s.id, b.id))
	against, undo := wk.againstSubstitute(rootC, bc, b, s)
	together(kill, against)
	if undo != nil {
		undo()
	}
	wk.r.count("race.kill-handoff", "ok")
}

// handoffSession sets up root's ACTIVE session with a and b in it, b its
// substitute; nil when any step is refused.
func (wk *worker) handoffSession(a, b *actor) *session {
	root := wk.w.root
	id := wk.w.name("s")
	_, out := wk.ctlC("session.create", "session "+id, root, "session.created",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.CreateSession(ctx, api.SessionRequest{ID: id, Config: json.RawMessage(`{"isolation":"SNAPSHOT","min_eff_score":0.5}`)})
		})
	if out != "ok" {
		return nil
	}
	s := &session{id: id, creator: root.id, state: "CREATED"}
	wk.w.addSession(s)
	for _, step := range []struct {
		by  *actor
		req api.SessionChangeRequest
	}{
		{root, api.SessionChangeRequest{Op: "state", State: "HANDSHAKING"}},
		{a, api.SessionChangeRequest{Op: "join"}},
		{b, api.SessionChangeRequest{Op: "join"}},
		{root, api.SessionChangeRequest{Op: "state", State: "ACTIVE"}},
		{root, api.SessionChangeRequest{Op: "substitute", Agent: b.id}},
	} {
		if wk.sessionChange(step.by, s, step.req) != "ok" {
			return nil
		}
	}
	return s
}

// againstSubstitute draws what happens to the substitute b of session s
// while its principal is killed: root (with its client rootC) freezes,
// quarantines (in s or everywhere), stops or kills it, or b (with bc)
// leaves s. undo, if not nil, puts back what a freeze, quarantine or stop
// did.
func (wk *worker) againstSubstitute(rootC, bc *client.Client, b *actor, s *session) (against, undo func()) {
	switch oneOf(wk, "freeze", "quarantine", "sigstop", "leave", "kill") {
	case "freeze":
		return wk.statusMove(rootC, b, "frozen"), wk.unfreezeMove(b)
	case "quarantine":
		sess := s.id
		if wk.chance(3) {
			sess = ""
		}
		return wk.quarantineMove(rootC, b, sess, fmt.Sprintf("quarantine %s in %q", b.id, sess)),
			wk.releaseMove(b, sess, fmt.Sprintf("release %s in %q", b.id, sess))
	case "sigstop":
		return wk.sigstopMove(rootC, b), func() { wk.sendSignal(wk.w.root, b, "SIGCONT") }
	case "leave":
		return func() {
			_, out := wk.ctlCWith(bc, "session.leave", "leave "+s.id, b, "session.changed",
				func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
					return c.ChangeSession(ctx, s.id, api.SessionChangeRequest{Op: "leave"})
				})
			if out == "ok" {
				wk.w.joined(s, b.id, false)
			}
		}, nil
	default:
		return wk.killMove(rootC, b, "", fmt.Sprintf("kill %s (the substitute)", b.id)), nil
	}
}

// raceApproveVsControl: a human approves a hold while root freezes,
// stops, quarantines, terminates or kills its agent, revokes its envelope
// or its key, or another human rejects it. Two answers to one hold never
// both succeed.
func (wk *worker) raceApproveVsControl() {
	a, hd := wk.heldAction(nil)
	if hd == nil {
		return
	}
	root := wk.w.root
	by := wk.w.actorByID(a.creator)
	if by == nil {
		by = root
	}
	bc, rootC := by.client(wk.w, wk.rng), root.plain
	var answered atomic.Int64
	approve := func() {
		if wk.answerWith(bc, by, hd, "approve") == "ok" {
			answered.Add(1)
		}
	}
	against, undo := wk.againstApproval(rootC, a, by, hd, &answered)
	if against == nil {
		return
	}
	together(approve, against)
	if answered.Load() > 1 {
		wk.r.failure("race.approve-vs-control", "approve and reject hold "+hd.id+" at once", "both answers to one hold succeeded")
	}
	if undo != nil {
		undo()
	}
	wk.r.count("race.approve-vs-control", "ok")
}

// againstApproval draws what root (with its client rootC) does while by
// approves agent a's hold hd: freeze, stop, quarantine, terminate or kill
// a, revoke hd's envelope, reject hd (counted in answered when it
// succeeds), or require by's signature. undo, if not nil, puts back what a
// freeze, stop or quarantine did; against is nil when the draw cannot
// race (by is root, whose key is not set).
func (wk *worker) againstApproval(rootC *client.Client, a, by *actor, hd *hold, answered *atomic.Int64) (against, undo func()) {
	root := wk.w.root
	switch what := oneOf(wk, "freeze", "sigstop", "quarantine", "revoke", "kill", "terminate", "reject", "key"); what {
	case "freeze":
		return wk.statusMove(rootC, a, "frozen"), wk.unfreezeMove(a)
	case "terminate":
		return wk.statusMove(rootC, a, "terminated"), nil
	case "sigstop":
		return wk.sigstopMove(rootC, a), func() { wk.sendSignal(root, a, "SIGCONT") }
	case "quarantine":
		return wk.quarantineMove(rootC, a, "", "quarantine "+a.id), wk.releaseMove(a, "", "release "+a.id)
	case "revoke":
		env := hd.envelope
		return func() {
			_, out := wk.ctlWith(rootC, "envelope.revoke", "revoke "+env, root, "envelope.revoked",
				func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
					return c.RevokeEnvelope(ctx, env, "race")
				})
			if out == "ok" {
				wk.w.revokeEnvelope(env)
			}
		}, nil
	case "kill":
		return wk.killMove(rootC, a, "", "kill "+a.id), nil
	case "reject":
		return func() {
			if wk.answerWith(rootC, root, hd, "reject") == "ok" {
				answered.Add(1)
			}
		}, nil
	default:
		// The approver's key, required, registered at the same instant.
		if by == root {
			return nil, nil
		}
		return func() {
			req := api.SigningKeyRequest{Key: by.vkey, RequireSigned: true, Reason: "race"}
			_, out := wk.ctlWith(rootC, "key.set", fmt.Sprintf("key of %s on=true require_signed=true", by.id), root, "actor.key",
				func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
					return c.SetSigningKey(ctx, by.id, req)
				})
			if out == "ok" {
				wk.w.setKey(by, true, true)
			}
		}, nil
	}
}

// The moves of root that the races set against another request, each on
// agent x, with root's client c when it runs in a race's goroutine (it
// draws nothing from the worker's source then).

// statusMove sets x's status ("frozen", "terminated"); a terminated
// agent is dead.
func (wk *worker) statusMove(c *client.Client, x *actor, status string) func() {
	return func() {
		_, out := wk.ctlWith(c, "actor.status", status+" "+x.id, wk.w.root, "actor.status",
			func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
				return c.SetStatus(ctx, x.id, status, "race")
			})
		if out == "ok" && status == "terminated" {
			wk.w.markDead(x.id)
		}
	}
}

// unfreezeMove makes x active again, once the race is over.
func (wk *worker) unfreezeMove(x *actor) func() {
	return func() {
		wk.ctl("actor.status", "active "+x.id, wk.w.root, "actor.status",
			func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
				return c.SetStatus(ctx, x.id, "active", "race over")
			})
	}
}

// sigstopMove sends x SIGSTOP.
func (wk *worker) sigstopMove(c *client.Client, x *actor) func() {
	return func() {
		wk.ctlCWith(c, "signal", "SIGSTOP to "+x.id, wk.w.root, "signal.sent",
			func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
				return c.Signal(ctx, x.id, api.SignalRequest{Signal: "SIGSTOP", Reason: "race"})
			})
	}
}

// quarantineMove quarantines x for two seconds in session sess ("": in
// all), desc saying so.
func (wk *worker) quarantineMove(c *client.Client, x *actor, sess, desc string) func() {
	return func() {
		wk.ctlCWith(c, "quarantine", desc, wk.w.root, "quarantine.started",
			func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
				return c.Quarantine(ctx, x.id, api.QuarantineRequest{Reason: "manual", Session: sess, DurationSeconds: 2})
			})
	}
}

// releaseMove ends x's quarantine in session sess, once the race is over.
func (wk *worker) releaseMove(x *actor, sess, desc string) func() {
	return func() {
		wk.ctlC("release", desc, wk.w.root, "quarantine.ended",
			func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
				return c.Release(ctx, x.id, api.ReleaseRequest{Session: sess, Reason: "race over"})
			})
	}
}

// killMove kills x (in session sess, if not ""); a killed agent is dead.
func (wk *worker) killMove(c *client.Client, x *actor, sess, desc string) func() {
	return func() {
		_, out := wk.ctlCWith(c, "kill", desc, wk.w.root, "agent.killed",
			func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
				return c.Kill(ctx, x.id, api.KillRequest{Reason: "manual", Session: sess})
			})
		if out == "ok" {
			wk.w.markDead(x.id)
		}
	}
}

// raceBudget: an agent spends an envelope with a small budget with a dozen
// mutates at once; what they commit never costs more than the budget.
func (wk *worker) raceBudget() {
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	by := wk.w.actorByID(a.creator)
	if by == nil {
		return
	}
	const cost = 15 // a mutate, in the workload's energy model
	budget := uint64(cost*(1+wk.rng.IntN(5)) + wk.rng.IntN(cost))
	env := wk.sendEnvelope("envelope.issue", by, api.EnvelopeRequest{Holder: a.id, Budget: budget, Grants: envelopeGrants})
	if env == nil {
		return
	}
	c := a.client(wk.w, wk.rng)
	var committed atomic.Int64
	fs := make([]func(), 12)
	for i := range fs {
		target := fmt.Sprintf("workspace/budget/%d", i)
		fs[i] = func() {
			rc, err := wk.submitWith(c, "act.budget", a, api.ActionRequest{Type: "mutate", Target: target, Envelope: env.id}, false)
			if err == nil && rc.Status == "committed" {
				committed.Add(1)
			}
		}
	}
	together(fs...)
	if spent := uint64(committed.Load()) * cost; spent > budget {
		wk.r.failure("race.budget", fmt.Sprintf("12 mutates under %s", env.id),
			fmt.Sprintf("envelope %s with a budget of %d committed %d mutates of %d each (%d)", env.id, budget, committed.Load(), cost, spent))
	}
	wk.r.count("race.budget", "ok")
}
