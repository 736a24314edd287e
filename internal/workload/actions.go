package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/execute"
)

// The actions: every shape the pipeline treats apart (observe, create,
// mutate, held, execute records, intents and their results, sessions,
// sealed payloads, payload hashes, declared resources, descriptors), the
// answers to holds, and the erasure of sealed payloads' subjects.

// act sends one action of an agent (now and then of a human), of one of
// the shapes the pipeline treats apart.
func (wk *worker) act() {
	if wk.chance(15) {
		wk.humanAct()
		return
	}
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	file := oneOf(wk, "a", "b", "c", "d", "e")
	n := wk.rng.IntN(100)
	shape := actionShapes[slices.IndexFunc(actionShapes, func(s actionShape) bool { return n < s.below })]
	x, ok := shape.draw(wk, a, file)
	if !ok {
		return
	}
	if x.env == nil && wk.chance(3) {
		x.env = wk.w.envelopeOf(wk.rng, x.by.id, false)
	}
	if x.env != nil {
		x.req.Envelope = x.env.id
	}
	wk.submit(x.op, x.by, x.req, x.env)
}

// action is one action act sends: its operation's name, its actor, the
// request, and the envelope it goes under (nil: perhaps one of the
// actor's, drawn by act).
type action struct {
	op  string
	by  *actor
	req api.ActionRequest
	env *envelope
}

// actionShape is one shape of action: act draws a number below 100, and
// the first shape it is below draws the action, of agent a on file. A
// shape answers false when there is nothing to submit.
type actionShape struct {
	below int
	draw  func(wk *worker, a *actor, file string) (action, bool)
}

// actionShapes are act's shapes, from the most likely bound up.
var actionShapes = []actionShape{
	{10, func(wk *worker, a *actor, file string) (action, bool) {
		return action{op: "act.observe", by: a, req: api.ActionRequest{Type: "observe", Target: "workspace/" + file + ".md"}}, true
	}},
	{30, func(wk *worker, a *actor, file string) (action, bool) {
		return action{op: "act.mutate", by: a, req: api.ActionRequest{Type: oneOf(wk, "create", "mutate"), Target: "workspace/" + file + ".md",
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"text":"%s"}`, wk.rng.IntN(1000), oneOf(wk, "notes", "an ssn 078-05-1120", "password: hunter2", "plain")))}}, true
	}},
	{42, func(wk *worker, a *actor, file string) (action, bool) {
		req := api.ActionRequest{Type: "mutate", Target: "workspace/release/" + file, Payload: json.RawMessage(`{"release":true}`)}
		return action{op: "act.held", by: a, req: req, env: wk.w.envelopeOf(wk.rng, a.id, true)}, true
	}},
	{50, func(wk *worker, a *actor, file string) (action, bool) {
		return action{op: "act.execute", by: a, req: api.ActionRequest{Type: "execute", Target: "exec/run/" + file, Payload: json.RawMessage(fmt.Sprintf(
			`{"input_oid":%q,"output_oid":%q,"artifact_hash":%q,"exit_code":0,"output_bytes":%d}`, oid("in"+file), oid("out"), oid("art"), wk.rng.IntN(4096)))}}, true
	}},
	{64, func(wk *worker, a *actor, file string) (action, bool) {
		x := action{op: "act.intent", by: a}
		target := "exec/run/" + file
		if wk.chance(3) {
			target = "exec/deploy/" + file
			x.env = wk.w.envelopeOf(wk.rng, a.id, true)
		}
		p, _ := execute.Intent(oid("cmd"+file), map[string]any{"argv": []string{"make", file}})
		x.req = api.ActionRequest{Type: "execute", Target: target, Payload: p}
		return x, true
	}},
	{74, func(wk *worker, a *actor, file string) (action, bool) {
		wk.result()
		return action{}, false
	}},
	{84, func(wk *worker, a *actor, file string) (action, bool) {
		// Most often one of the session's participants, now and then
		// any agent.
		s := wk.w.activeSession(wk.rng)
		if s == nil {
			return action{}, false
		}
		if p := wk.w.actorByID(wk.w.participant(wk.rng, s)); p != nil && !wk.chance(8) {
			a = p
		}
		return action{op: "act.session", by: a, req: api.ActionRequest{Type: oneOf(wk, "create", "mutate", "observe"), Target: "sessions/" + s.id + "/" + file + ".txt", Session: s.id}}, true
	}},
	{93, func(wk *worker, a *actor, file string) (action, bool) {
		return action{op: "act.sealed", by: a, req: api.ActionRequest{Type: oneOf(wk, "create", "mutate"), Target: "crm/" + file + ".json",
			Payload: json.RawMessage(fmt.Sprintf(`{"email":"%s@example.org"}`, file)), Subject: wk.w.subject(wk.rng)}}, true
	}},
	{95, func(wk *worker, a *actor, file string) (action, bool) {
		return action{op: "act.payload-hash", by: a, req: api.ActionRequest{Type: "mutate", Target: "workspace/" + file + ".bin", PayloadHash: oid(file)}}, true
	}},
	{96, func(wk *worker, a *actor, file string) (action, bool) {
		// A write to the agent file system (its own tree, needing no
		// grant, or a view the rule refuses), or a resume-sensitive
		// working file.
		rel := oneOf(wk, "mem/working/", "mem/semantic/", "ipc/inbox/", "state/checkpoints/") + file
		if wk.chance(8) {
			rel = oneOf(wk, "policy/active.json", "audit/events.jsonl", "ipc/outbox/x/"+file)
		}
		return action{op: "act.vfs", by: a, req: api.ActionRequest{Type: oneOf(wk, "create", "mutate"), Target: "vfs/" + a.id + "/" + rel, PayloadHash: oid(file)}}, true
	}},
	{98, func(wk *worker, a *actor, file string) (action, bool) {
		return action{op: "act.resources", by: a, req: api.ActionRequest{Type: "mutate", Target: "workspace/" + file + ".md",
			Resources: &api.Resources{Network: []string{oneOf(wk, "api.example.com:443", "x.corp.example:80", "evil.example:443")}, Tools: uint64(wk.rng.IntN(10))}}}, true
	}},
	{100, func(wk *worker, a *actor, file string) (action, bool) {
		return action{op: "act.descriptor", by: a, req: api.ActionRequest{Type: "mutate", Target: "payments/" + file, ActionID: oneOf(wk, "pay.transfer", "pay.admin")}}, true
	}},
}

// sealing reports whether the kernel seals a's payloads under env (or
// under any envelope, when env is nil), as far as the workload knows.
func (w *world) sealing(a *actor, env *envelope) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if a.seals {
		return true
	}
	if env != nil {
		return env.seals
	}
	for _, e := range w.envelopes {
		if e.holder == a.id && e.seals && !e.revoked {
			return true
		}
	}
	return false
}

// submit sends an action of a and keeps what its answer opens: a hold, an
// intent.
func (wk *worker) submit(op string, a *actor, req api.ActionRequest, env *envelope) (*api.Receipt, error) {
	c := a.client(wk.w, wk.rng)
	published := wk.chance(40)
	if published {
		op = "act.published"
	}
	return wk.submitWith(c, op, a, req, published)
}

// submitWith is submit with the client chosen; it draws nothing from the
// worker's source, so races may call it from their goroutines.
func (wk *worker) submitWith(c *client.Client, op string, a *actor, req api.ActionRequest, published bool) (*api.Receipt, error) {
	req = wk.w.sealedAs(c, a, req)
	ctx, cancel := wk.ctx()
	defer cancel()
	var rc *api.Receipt
	var err error
	if published {
		rc, err = c.SubmitAndWait(ctx, req)
	} else {
		rc, err = c.Submit(ctx, req)
	}
	desc := fmt.Sprintf("%s %s %s by %s", req.Type, req.Target, req.Envelope, a.id)
	if err != nil {
		rc = nil
	}
	out := wk.done(op, desc, err, rc, expect{kinds: kinds("action", "hold.requested"), actors: actors(a.id), typ: req.Type, target: req.Target})
	wk.w.keepOpened(out, a, req, rc)
	return rc, err
}

// sealedAs is req as a sends it with c when the kernel seals its payload
// (an action other than execute and observe, of an actor or under an
// envelope that seals): a sealed payload travels inline, and a signed
// request seals it itself (it signs the commitment).
func (w *world) sealedAs(c *client.Client, a *actor, req api.ActionRequest) api.ActionRequest {
	var env *envelope
	if req.Envelope != "" {
		env = w.envelopeByID(req.Envelope)
	}
	if req.Type == "execute" || req.Type == "observe" || !w.sealing(a, env) {
		return req
	}
	if req.PayloadHash != "" || req.Payload == nil {
		req.PayloadHash, req.Payload = "", json.RawMessage(`{"sealed":true}`)
	}
	req.Seal = req.Seal || c == a.signed
	return req
}

// keepOpened keeps what the answer out to a's action req opened: a hold
// (with the intent an approval opens, for an intent), or an intent.
func (w *world) keepOpened(out string, a *actor, req api.ActionRequest, rc *api.Receipt) {
	intentPayload := req.Type == "execute" && len(req.Payload) > 0 && json.Valid(req.Payload) && hasPhase(req.Payload)
	switch out {
	case "held":
		h := &hold{id: rc.HoldID, agent: a.id, envelope: rc.Envelope}
		if intentPayload {
			h.intent = &intent{agent: a, target: req.Target, envelope: rc.Envelope, session: req.Session, input: inputOf(req.Payload)}
		}
		w.addHold(h)
	case "ok":
		if intentPayload {
			w.addIntent(&intent{agent: a, index: rc.Index, target: req.Target, envelope: rc.Envelope, session: req.Session, input: inputOf(req.Payload)})
		}
	}
}

func hasPhase(p json.RawMessage) bool {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(p, &m)
	_, ok := m["phase"]
	return ok
}

func inputOf(p json.RawMessage) string {
	var m struct {
		Input string `json:"input_oid"`
	}
	_ = json.Unmarshal(p, &m)
	return m.Input
}

// result records what ran under an open intent.
func (wk *worker) result() {
	in := wk.w.takeIntent(wk.rng)
	if in == nil {
		return
	}
	ctx, cancel := wk.ctx()
	defer cancel()
	ci := &client.Intent{Index: in.index, Target: in.target, Envelope: in.envelope, Session: in.session, InputOID: in.input}
	r := execute.Result{OutputOID: oid("stdout"), ArtifactHash: oid("artifact"), ExitCode: int32(wk.rng.IntN(3)), OutputBytes: uint64(wk.rng.IntN(2048))}
	rc, err := in.agent.client(wk.w, wk.rng).RecordResult(ctx, ci, r)
	if err != nil {
		rc = nil
	}
	wk.done("act.result", fmt.Sprintf("execute result of intent %d on %s by %s", in.index, in.target, in.agent.id), err, rc,
		expect{kinds: kinds("action"), actors: actors(in.agent.id), typ: "execute", target: in.target})
}

// humanAct is an action of a human, which no envelope binds.
func (wk *worker) humanAct() {
	h := wk.w.human(wk.rng)
	req := api.ActionRequest{Type: oneOf(wk, "observe", "create", "mutate"), Target: "workspace/" + oneOf(wk, "a", "b", "human") + ".md"}
	if wk.chance(4) {
		req.Subject, req.Payload = wk.w.subject(wk.rng), json.RawMessage(`{"email":"h@example.org"}`)
		if req.Type == "observe" {
			req.Type = "create"
		}
	}
	wk.submit("act.human", h, req, nil)
}

// answerHold approves or rejects a hold, most often as the agent's
// creator.
func (wk *worker) answerHold() {
	h := wk.w.hold(wk.rng)
	if h == nil {
		return
	}
	ag := wk.w.actorByID(h.agent)
	by := wk.w.human(wk.rng)
	if ag != nil && wk.rng.IntN(10) < 6 {
		if c := wk.w.actorByID(ag.creator); c != nil {
			by = c
		}
	}
	decision := "approve"
	if wk.chance(4) {
		decision = "reject"
	}
	wk.answer(by, h, decision)
}

// answer sends by's answer to hold h and keeps the intent an approval
// opens.
func (wk *worker) answer(by *actor, h *hold, decision string) string {
	return wk.answerWith(by.client(wk.w, wk.rng), by, h, decision)
}

// answerWith is answer with the client chosen (for races).
func (wk *worker) answerWith(c *client.Client, by *actor, h *hold, decision string) string {
	ctx, cancel := wk.ctx()
	defer cancel()
	rc, err := c.AnswerHold(ctx, h.id, decision, "workload")
	if err != nil {
		rc = nil
	}
	out := wk.done("hold."+decision, fmt.Sprintf("%s hold %s of %s by %s", decision, h.id, h.agent, by.id), err, rc,
		expect{kinds: kinds("action", "hold.answered"), actors: actors(by.id, h.agent)})
	switch out {
	case "ok", "404", "409":
		wk.w.dropHold(h.id)
	}
	if out == "ok" && decision == "approve" && h.intent != nil && rc.Actor == h.agent {
		in := *h.intent
		in.index = rc.Index
		wk.w.addIntent(&in)
	}
	return out
}

// erase erases a subject of sealed payloads.
func (wk *worker) erase() {
	subject := wk.w.subject(wk.rng)
	by := wk.w.human(wk.rng)
	_, out := wk.ctl("erase", "erase "+subject, by, "subject.erased", func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
		return c.EraseSubject(ctx, subject, api.EraseRequest{Reason: "workload"})
	})
	if out == "ok" || out == "409" {
		wk.w.erased(subject)
	}
}
