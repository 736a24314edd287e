package workload

import (
	"context"
	"encoding/json"
	"fmt"

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
	req := api.ActionRequest{}
	op := ""
	var env *envelope
	switch n := wk.rng.IntN(100); {
	case n < 10:
		op, req = "act.observe", api.ActionRequest{Type: "observe", Target: "workspace/" + file + ".md"}
	case n < 30:
		op, req = "act.mutate", api.ActionRequest{Type: oneOf(wk, "create", "mutate"), Target: "workspace/" + file + ".md",
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"text":"%s"}`, wk.rng.IntN(1000), oneOf(wk, "notes", "an ssn 078-05-1120", "password: hunter2", "plain")))}
	case n < 42:
		op, req = "act.held", api.ActionRequest{Type: "mutate", Target: "workspace/release/" + file, Payload: json.RawMessage(`{"release":true}`)}
		env = wk.w.envelopeOf(wk.rng, a.id, true)
	case n < 50:
		op = "act.execute"
		req = api.ActionRequest{Type: "execute", Target: "exec/run/" + file, Payload: json.RawMessage(fmt.Sprintf(
			`{"input_oid":%q,"output_oid":%q,"artifact_hash":%q,"exit_code":0,"output_bytes":%d}`, oid("in"+file), oid("out"), oid("art"), wk.rng.IntN(4096)))}
	case n < 64:
		op = "act.intent"
		target := "exec/run/" + file
		if wk.chance(3) {
			target = "exec/deploy/" + file
			env = wk.w.envelopeOf(wk.rng, a.id, true)
		}
		p, _ := execute.Intent(oid("cmd"+file), map[string]any{"argv": []string{"make", file}})
		req = api.ActionRequest{Type: "execute", Target: target, Payload: p}
	case n < 74:
		wk.result()
		return
	case n < 84:
		// Most often one of the session's participants, now and then
		// any agent.
		s := wk.w.activeSession(wk.rng)
		if s == nil {
			return
		}
		if p := wk.w.actorByID(wk.w.participant(wk.rng, s)); p != nil && !wk.chance(8) {
			a = p
		}
		op, req = "act.session", api.ActionRequest{Type: oneOf(wk, "create", "mutate", "observe"), Target: "sessions/" + s.id + "/" + file + ".txt", Session: s.id}
	case n < 93:
		op, req = "act.sealed", api.ActionRequest{Type: oneOf(wk, "create", "mutate"), Target: "crm/" + file + ".json",
			Payload: json.RawMessage(fmt.Sprintf(`{"email":"%s@example.org"}`, file)), Subject: wk.w.subject(wk.rng)}
	case n < 96:
		op, req = "act.payload-hash", api.ActionRequest{Type: "mutate", Target: "workspace/" + file + ".bin", PayloadHash: oid(file)}
	case n < 98:
		op, req = "act.resources", api.ActionRequest{Type: "mutate", Target: "workspace/" + file + ".md",
			Resources: &api.Resources{Network: []string{oneOf(wk, "api.example.com:443", "x.corp.example:80", "evil.example:443")}, Tools: uint64(wk.rng.IntN(10))}}
	default:
		op, req = "act.descriptor", api.ActionRequest{Type: "mutate", Target: "payments/" + file, ActionID: oneOf(wk, "pay.transfer", "pay.admin")}
	}
	if env == nil && wk.chance(3) {
		env = wk.w.envelopeOf(wk.rng, a.id, false)
	}
	if env != nil {
		req.Envelope = env.id
	}
	wk.submit(op, a, req, env)
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
	var env *envelope
	if req.Envelope != "" {
		env = wk.w.envelopeByID(req.Envelope)
	}
	if req.Type != "execute" && req.Type != "observe" && wk.w.sealing(a, env) {
		// A sealed payload travels inline, and a signed request seals it
		// itself (it signs the commitment).
		if req.PayloadHash != "" || req.Payload == nil {
			req.PayloadHash, req.Payload = "", json.RawMessage(`{"sealed":true}`)
		}
		req.Seal = req.Seal || c == a.signed
	}
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
	intentPayload := req.Type == "execute" && len(req.Payload) > 0 && json.Valid(req.Payload) && hasPhase(req.Payload)
	switch out {
	case "held":
		h := &hold{id: rc.HoldID, agent: a.id, envelope: rc.Envelope}
		if intentPayload {
			h.intent = &intent{agent: a, target: req.Target, envelope: rc.Envelope, session: req.Session, input: inputOf(req.Payload)}
		}
		wk.w.addHold(h)
	case "ok":
		if intentPayload {
			wk.w.addIntent(&intent{agent: a, index: rc.Index, target: req.Target, envelope: rc.Envelope, session: req.Session, input: inputOf(req.Payload)})
		}
	}
	return rc, err
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
