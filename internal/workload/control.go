package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// The execution control operations: rings, descriptors and elevations,
// sessions and their deltas, quarantines, signals, sagas and kills.

// assignRing records a trust score for an agent, now and then with a
// demotion.
func (wk *worker) assignRing() {
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	trust := oneOf(wk, 0.3, 0.55, 0.7, 0.8, 0.9, 0.97)
	req := api.RingRequest{Trust: trust, Consensus: trust > 0.95 && wk.chance(2), Reason: "workload"}
	if wk.chance(6) {
		r := oneOf(wk, 2, 3)
		req.Ring = &r
	}
	_, out := wk.ctlC("ring.assign", fmt.Sprintf("trust %v for %s", trust, a.id), wk.overseer(a), "agent.ring",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.AssignRing(ctx, a.id, req)
		})
	if out == "ok" {
		wk.w.mu.Lock()
		a.trust = trust
		wk.w.mu.Unlock()
	}
}

// configureRings sets Ring 2's network allowlist (root, now and then
// another human, refused).
func (wk *worker) configureRings() {
	allow := oneOf(wk, []string{"api.example.com"}, []string{"api.example.com", "*.corp.example"}, []string{})
	by := wk.w.root
	if wk.chance(5) {
		by = wk.w.human(wk.rng)
	}
	wk.ctlC("rings.config", fmt.Sprintf("allowlist %v", allow), by, "rings.configured",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.ConfigureRings(ctx, allow)
		})
}

// registerDescriptor registers one of two descriptors: an irreversible
// payment (Ring 1) and an administrative one (Ring 0).
func (wk *worker) registerDescriptor() {
	id := oneOf(wk, "pay.transfer", "pay.admin")
	d := `{"action_id":"pay.transfer","name":"Transfer money","execute_api":"/api/pay/transfer","reversibility":"NONE","undo_window_seconds":0,"is_read_only":false,"is_admin":false}`
	if id == "pay.admin" {
		d = `{"action_id":"pay.admin","name":"Administer payments","execute_api":"/api/pay/admin","reversibility":"FULL","undo_api":"/api/pay/admin/undo","undo_window_seconds":60,"is_read_only":false,"is_admin":true}`
	}
	pattern := "payments/**"
	if id == "pay.admin" {
		pattern = "payments/admin/*"
	}
	req := api.DescriptorRequest{Descriptor: json.RawMessage(d), AppliesTo: []api.Grant{{Pattern: pattern, Actions: []string{"mutate"}}}}
	wk.ctlC("descriptor.register", "descriptor "+id, wk.w.root, "action.registered",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.RegisterDescriptor(ctx, id, req)
		})
}

// elevate asks for an elevation: an agent for Ring 2 for itself, a human
// for Ring 1.
func (wk *worker) elevate() {
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	req := api.ElevationRequest{Agent: a.id, Ring: 2, TTLSeconds: int64(oneOf(wk, 1, 5, 30, 300)), Reason: "workload"}
	by := a
	if wk.chance(2) {
		by, req.Ring = wk.overseer(a), 1
	}
	if s := wk.w.sessionOf(wk.rng, a.id); s != nil && wk.chance(3) {
		req.Session = s.id
	}
	cc, out := wk.ctlC("elevation", fmt.Sprintf("ring %d for %s in %q", req.Ring, a.id, req.Session), by, "elevation.granted",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) { return c.Elevate(ctx, req) })
	if out == "ok" {
		var rec struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(cc.Record, &rec) == nil && rec.ID != "" {
			wk.w.addElevation(rec.ID)
		}
	}
}

// revokeElevation ends an elevation.
func (wk *worker) revokeElevation() {
	id := wk.w.elevation(wk.rng)
	if id == "" {
		return
	}
	wk.ctlC("elevation.revoke", "revoke "+id, wk.w.root, "elevation.ended",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.RevokeElevation(ctx, id, "workload")
		})
}

// createSession opens a session (most often root's) with a configuration
// of one of a few shapes.
func (wk *worker) createSession() {
	by := wk.w.root
	if wk.chance(3) {
		by = wk.w.human(wk.rng)
	} else if wk.chance(4) {
		if a := wk.w.agent(wk.rng); a != nil {
			by = a
		}
	}
	wk.openSession(by)
}

// openSession creates a session of by.
func (wk *worker) openSession(by *actor) *session {
	id := wk.w.name("s")
	isolation, mode := oneOf(wk, "SNAPSHOT", "READ_COMMITTED", "SERIALIZABLE"), oneOf(wk, "EVENTUAL", "EVENTUAL", "STRONG")
	cfg := fmt.Sprintf(`{"isolation":%q,"consistency_mode":%q,"min_eff_score":%v,"max_duration_seconds":%d}`,
		isolation, mode, oneOf(wk, 0.5, 0.6), oneOf(wk, 3600, 3600, 20))
	_, out := wk.ctlC("session.create", "session "+id, by, "session.created",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.CreateSession(ctx, api.SessionRequest{ID: id, Config: json.RawMessage(cfg)})
		})
	if out != "ok" {
		return nil
	}
	s := &session{id: id, creator: by.id, state: "CREATED", serializable: isolation == "SERIALIZABLE", strong: mode == "STRONG"}
	wk.w.addSession(s)
	return s
}

// nextState is where a session goes next.
var nextState = map[string]string{"CREATED": "HANDSHAKING", "HANDSHAKING": "ACTIVE", "ACTIVE": "TERMINATING", "TERMINATING": "ARCHIVED"}

// changeSession sends one change of a session, most often the one its
// state calls for: in CREATED its start, in HANDSHAKING joins and then
// ACTIVE, in ACTIVE substitutes, grants, leaves and now and then its end.
func (wk *worker) changeSession() {
	s := wk.w.session(wk.rng)
	if s == nil {
		return
	}
	owner := wk.w.actorByID(s.creator)
	if owner == nil || wk.chance(10) {
		owner = wk.w.root
	}
	wk.w.mu.Lock()
	state, members := s.state, len(s.participants)
	wk.w.mu.Unlock()
	switch wk.sessionOp(state, members) {
	case "state":
		wk.nextSessionState(owner, s, state)
	case "join":
		wk.joinSession(owner, s)
	case "leave":
		wk.leaveSession(s)
	case "grant":
		wk.grantSession(owner, s)
	default:
		wk.substitute(owner, s)
	}
}

// sessionOp draws the change to send to a session in state with members
// participants: most often the one the state calls for.
func (wk *worker) sessionOp(state string, members int) string {
	op := oneOf(wk, "state", "join", "join", "leave", "grant", "substitute")
	switch state {
	case "CREATED", "TERMINATING":
		if !wk.chance(5) {
			op = "state"
		}
	case "HANDSHAKING":
		op = "join"
		if members >= 2 && wk.chance(3) || wk.chance(10) {
			op = "state"
		}
	case "ACTIVE":
		if op == "state" && !wk.chance(6) {
			op = "substitute"
		}
	}
	return op
}

// nextSessionState moves a session on from state, now and then to any
// state.
func (wk *worker) nextSessionState(owner *actor, s *session, state string) {
	next := nextState[state]
	if next == "" || wk.chance(10) {
		next = oneOf(wk, "HANDSHAKING", "ACTIVE", "TERMINATING", "ARCHIVED")
	}
	wk.sessionChange(owner, s, api.SessionChangeRequest{Op: "state", State: next})
}

// joinSession makes an agent join a session, by itself or by the owner.
func (wk *worker) joinSession(owner *actor, s *session) {
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	by := a
	req := api.SessionChangeRequest{Op: "join"}
	if wk.chance(3) {
		by, req.Agent = owner, a.id
	}
	wk.sessionChange(by, s, req)
}

// leaveSession makes a participant leave a session.
func (wk *worker) leaveSession(s *session) {
	a := wk.w.actorByID(wk.w.participant(wk.rng, s))
	if a == nil {
		return
	}
	wk.sessionChange(a, s, api.SessionChangeRequest{Op: "leave"})
}

// grantSession sends a session a grant of another session (op grant).
func (wk *worker) grantSession(owner *actor, s *session) {
	other := wk.w.session(wk.rng)
	if other == nil || other == s {
		return
	}
	wk.sessionChange(owner, s, api.SessionChangeRequest{Op: "grant", Granted: other.id})
}

// coordinate sends, most often in an active session, an intent lock, a
// release or an acknowledgement (of the head now) by a participant, now
// and then the owner's release of someone's lock; the paths overlap the
// deltas' files and the session actions' targets, so locks race the
// writes they keep out.
func (wk *worker) coordinate() {
	s := wk.w.coordinatedSession(wk.rng)
	if s == nil {
		return
	}
	paths := []string{"a.txt", "b.txt", "a", "b.txt/x"}
	if wk.chance(8) { // the owner releases someone's lock
		owner := wk.w.actorByID(s.creator)
		if owner == nil || wk.chance(4) {
			owner = wk.w.root
		}
		wk.sessionChange(owner, s, api.SessionChangeRequest{Op: "unlock", Path: oneOf(wk, paths...)})
		return
	}
	by := wk.w.actorByID(wk.w.participant(wk.rng, s))
	if by == nil {
		return
	}
	// Mostly what the session takes, now and then what it refuses.
	lock, ack := s.serializable, s.strong
	if lock && ack {
		lock = wk.chance(2)
	}
	switch {
	case !lock && !ack && !wk.chance(10):
		return
	case wk.chance(10):
		lock = !lock
	}
	req := api.SessionChangeRequest{Op: "ack"}
	if lock {
		req = api.SessionChangeRequest{Op: oneOf(wk, "lock", "lock", "unlock"), Path: oneOf(wk, paths...)}
	}
	wk.sessionChange(by, s, req)
}

// substitute names a participant of a session as the substitute.
func (wk *worker) substitute(owner *actor, s *session) {
	p := wk.w.participant(wk.rng, s)
	if p == "" {
		return
	}
	wk.sessionChange(owner, s, api.SessionChangeRequest{Op: "substitute", Agent: p})
}

// sessionChange sends one session change and keeps what it changed.
func (wk *worker) sessionChange(by *actor, s *session, req api.SessionChangeRequest) string {
	_, out := wk.ctlC("session."+req.Op, fmt.Sprintf("%s %s %s%s", req.Op, s.id, req.State, req.Agent+req.Granted+req.Path), by, "session.changed",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.ChangeSession(ctx, s.id, req)
		})
	if out == "ok" {
		switch req.Op {
		case "state":
			wk.w.sessionState(s, req.State)
		case "join", "leave":
			agent := req.Agent
			if agent == "" {
				agent = by.id
			}
			wk.w.joined(s, agent, req.Op == "join")
		}
	}
	return out
}

// appendDelta records a turn of a session's participant.
func (wk *worker) appendDelta() {
	s := wk.w.activeSession(wk.rng)
	if s == nil {
		return
	}
	a := wk.w.actorByID(wk.w.participant(wk.rng, s))
	if a == nil {
		return
	}
	file := oneOf(wk, "a.txt", "b.txt", "c.txt")
	ch := api.Change{Path: file, Operation: oneOf(wk, "create", "modify", "delete")}
	if ch.Operation != "delete" {
		ch.ContentHash = oid(fmt.Sprint(wk.rng.IntN(100)))
	}
	turn := wk.w.name("turn")
	wk.ctlC("session.delta", fmt.Sprintf("turn %s of %s: %s %s", turn, s.id, ch.Operation, file), a, "session.delta",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.AppendDelta(ctx, s.id, api.DeltaRequest{TurnID: turn, Changes: []api.Change{ch}})
		})
}

// quarantine quarantines an agent for a few seconds, in one of its
// sessions or all.
func (wk *worker) quarantine() {
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	req := api.QuarantineRequest{Reason: oneOf(wk, "manual", "behavioral_drift"), DurationSeconds: int64(oneOf(wk, 1, 2, 3))}
	if s := wk.w.sessionOf(wk.rng, a.id); s != nil && wk.chance(2) {
		req.Session = s.id
	}
	_, out := wk.ctlC("quarantine", fmt.Sprintf("quarantine %s in %q", a.id, req.Session), wk.overseer(a), "quarantine.started",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.Quarantine(ctx, a.id, req)
		})
	if out == "ok" && req.Session == "" {
		wk.w.setFlag(a.id, flagQuarantined, true)
	}
}

// release ends an agent's quarantine, most often of one believed
// quarantined.
func (wk *worker) release() {
	a := wk.w.flagged(wk.rng, flagQuarantined)
	if a == nil || wk.chance(3) {
		if a = wk.w.agent(wk.rng); a == nil {
			return
		}
	}
	req := api.ReleaseRequest{Reason: "workload"}
	if s := wk.w.sessionOf(wk.rng, a.id); s != nil && wk.chance(3) {
		req.Session = s.id
	}
	_, out := wk.ctlC("release", fmt.Sprintf("release %s in %q", a.id, req.Session), wk.overseer(a), "quarantine.ended",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) { return c.Release(ctx, a.id, req) })
	if (out == "ok" || out == "409") && req.Session == "" {
		wk.w.setFlag(a.id, flagQuarantined, false)
	}
}

// signal sends a signal, most often SIGSTOP or SIGCONT; the signals that
// terminate are rare.
func (wk *worker) signal() {
	if a := wk.w.flagged(wk.rng, flagStopped); a != nil && wk.chance(2) {
		wk.sendSignal(wk.overseer(a), a, "SIGCONT")
		return
	}
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	var sig string
	switch n := wk.rng.IntN(100); {
	case n < 40:
		sig = "SIGSTOP"
	case n < 80:
		sig = "SIGCONT"
	case n < 92:
		sig = "SIGINT"
	case n < 97:
		sig = "SIGTERM"
	default:
		sig = oneOf(wk, "SIGKILL", "SIGTRUST", "SIGPOLICY")
	}
	wk.sendSignal(wk.overseer(a), a, sig)
}

// sendSignal sends sig to a and notes an agent it terminated.
func (wk *worker) sendSignal(by, a *actor, sig string) string {
	cc, out := wk.ctlC("signal", sig+" to "+a.id, by, "signal.sent",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.Signal(ctx, a.id, api.SignalRequest{Signal: sig, Reason: "workload"})
		})
	if out == "ok" && cc != nil {
		var rec struct {
			Effect string `json:"effect"`
		}
		if json.Unmarshal(cc.Record, &rec) == nil {
			switch rec.Effect {
			case "terminate":
				wk.w.markDead(a.id)
			case "stop":
				wk.w.setFlag(a.id, flagStopped, true)
			case "continue":
				wk.w.setFlag(a.id, flagStopped, false)
			}
		}
	}
	return out
}

// mask sets an agent's signal mask.
func (wk *worker) mask() {
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	var mask []string
	for _, s := range []string{"SIGCONT", "SIGINT", "SIGSTOP", "SIGTERM"} { // sorted, as the API wants
		if wk.chance(2) {
			mask = append(mask, s)
		}
	}
	if mask == nil {
		mask = []string{}
	}
	var err error
	wk.ctlC("signal.mask", fmt.Sprintf("mask %v of %s", mask, a.id), a, "signal.masked",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			var cc *api.Controlled
			cc, err = c.SetSignalMask(ctx, mask)
			return cc, err
		})
	// The mask is distinct maskable names, sorted: its form is right
	// whatever the kernel decides.
	if client.IsStatus(err, http.StatusBadRequest) {
		wk.r.failure("signal.mask", fmt.Sprintf("PUT /v1/signals/mask {\"mask\":%q} by %s", mask, a.id), "a well-formed mask refused as malformed: "+err.Error())
	}
}

// startSaga has an agent start a saga, in one of its sessions or none.
func (wk *worker) startSaga() {
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	sess := ""
	if s := wk.w.sessionOf(wk.rng, a.id); s != nil && !wk.chance(3) {
		sess = s.id
	}
	wk.sagaOf(a, sess, 1+wk.rng.IntN(3))
}

// sagaOf starts a saga of a with steps steps, in session sess.
func (wk *worker) sagaOf(a *actor, sess string, steps int) *saga {
	id := wk.w.name("g")
	req := api.SagaRequest{ID: id, Session: sess}
	g := &saga{id: id, owner: a.id, session: sess}
	for i := range steps {
		retries, timeout := wk.rng.IntN(3), oneOf(wk, 2, 30, 300)
		step := fmt.Sprintf("step%d", i+1)
		req.Steps = append(req.Steps, api.Step{ID: step, Action: "do " + step, Compensation: "undo " + step, MaxRetries: &retries, TimeoutSeconds: &timeout})
		g.steps = append(g.steps, step)
	}
	_, out := wk.ctlC("saga.start", fmt.Sprintf("saga %s in %q", id, sess), a, "saga.started",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) { return c.StartSaga(ctx, req) })
	if out != "ok" {
		return nil
	}
	wk.w.addSaga(g)
	return g
}

// reportStep reports one transition of a saga's step, most often the one
// that follows where the workload believes the saga is.
func (wk *worker) reportStep() {
	g := wk.w.saga(wk.rng)
	if g == nil {
		return
	}
	a := wk.w.actorByID(g.owner)
	if a == nil {
		return
	}
	wk.w.mu.Lock()
	cur, running := g.cur, g.running
	wk.w.mu.Unlock()
	if cur >= len(g.steps) {
		cur = len(g.steps) - 1
	}
	step, tr := g.steps[cur], "started"
	if running {
		tr = oneOf(wk, "succeeded", "succeeded", "succeeded", "failed")
	}
	if wk.chance(8) {
		step = oneOf(wk, g.steps...)
		tr = oneOf(wk, "started", "succeeded", "failed", "compensating", "compensated", "compensation_failed")
	}
	if wk.step1(a, g, step, tr) == "ok" {
		wk.w.mu.Lock()
		switch tr {
		case "started":
			g.running = true
		case "succeeded":
			g.running, g.cur = false, g.cur+1
		default:
			g.running = false
		}
		wk.w.mu.Unlock()
	}
}

// step1 reports one transition of a step of g.
func (wk *worker) step1(a *actor, g *saga, step, tr string) string {
	_, out := wk.ctlC("saga.step", fmt.Sprintf("%s %s of %s", tr, step, g.id), a, "saga.step",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.ReportStep(ctx, g.id, step, api.StepReport{Transition: tr, Reason: "workload"})
		})
	return out
}

// kill kills an agent, in one of its sessions or none.
func (wk *worker) kill() {
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	req := api.KillRequest{Reason: oneOf(wk, "manual", "behavioral_drift")}
	if s := wk.w.sessionOf(wk.rng, a.id); s != nil && wk.chance(2) {
		req.Session = s.id
	}
	wk.killAgent(wk.overseer(a), a, req)
}

// killAgent sends a kill and notes the agent dead.
func (wk *worker) killAgent(by, a *actor, req api.KillRequest) string {
	_, out := wk.ctlC("kill", fmt.Sprintf("kill %s in %q", a.id, req.Session), by, "agent.killed",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) { return c.Kill(ctx, a.id, req) })
	if out == "ok" {
		wk.w.markDead(a.id)
	}
	return out
}
