package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
)

// The governance operations: actors with their energy, shares and keys,
// their status, envelopes issued, delegated and revoked, and policies.

// createAgent has a human create an agent, and most often issue it an
// envelope.
func (wk *worker) createAgent() {
	by := wk.w.human(wk.rng)
	name := wk.w.name("agent")
	req := api.AgentRequest{Name: name, Purpose: "workload", Grants: agentGrants, Energy: 1_000_000}
	if wk.chance(3) {
		s := uint64(oneOf(wk, 0, 1, 10))
		req.Share = &s
	}
	trust := oneOf(wk, 0.55, 0.7, 0.8, 0.8, 0.9, 0.9, 0.97)
	if !wk.chance(10) {
		req.Trust = &trust
		req.Consensus = trust > 0.95 && wk.chance(2)
	} else {
		trust = 0
	}
	req.SealPayloads = wk.chance(15)
	wk.create(by, req, trust, true)
}

// create sends a creation and adds what it made to the world.
func (wk *worker) create(by *actor, req api.AgentRequest, trust float64, envelope bool) *actor {
	skey, vkey, err := newKey(req.Name)
	if err != nil {
		return nil
	}
	if wk.chance(4) {
		req.SigningKey, req.RequireSigned = vkey, wk.chance(3)
	}
	op := "agent.create"
	if req.Kind == "human" {
		op = "human.create"
	}
	ctx, cancel := wk.ctx()
	defer cancel()
	na, err := by.client(wk.w, wk.rng).CreateAgent(ctx, req)
	problem := ""
	desc := fmt.Sprintf("%s %s by %s", op, req.Name, by.id)
	if err == nil {
		if na.ID == "" || na.Credential == "" || na.Creator != by.id || na.Index == 0 {
			problem = fmt.Sprintf("creation answer %+v is not the actor asked for", *na)
		} else {
			wk.r.addAck(ack{op: op, index: na.Index, actors: actors(by.id), kinds: kinds("actor.created"), subject: na.ID})
		}
	}
	if out := wk.r.record(op, desc, err, problem, "ok"); out != "ok" {
		return nil
	}
	a, err := newActor(wk.w.url, na.ID, req.Name, na.Credential, req.Kind == "human", by.id, skey, vkey)
	if err != nil {
		return nil
	}
	a.trust, a.seals = trust, req.SealPayloads
	a.keyOn, a.requireSigned = req.SigningKey != "", req.RequireSigned
	if req.Kind == "human" {
		wk.w.addHuman(a)
		return a
	}
	wk.w.addAgent(a)
	if envelope && !wk.chance(10) {
		wk.issueTo(by, a)
	}
	return a
}

// createHuman has root create a human with a share of production.
func (wk *worker) createHuman() {
	share := uint64(oneOf(wk, 1, 2, 100, 10_000))
	req := api.AgentRequest{Kind: "human", Name: wk.w.name("human"), Purpose: "workload", Grants: humanGrants, Energy: 1 << 30, Share: &share}
	wk.create(wk.w.root, req, 0, false)
}

// setStatus freezes, unfreezes or (rarely) terminates an agent.
// Most often it unfreezes one believed frozen, so that freezes come and go.
func (wk *worker) setStatus() {
	a, status := wk.w.flagged(wk.rng, flagFrozen), "active"
	if a == nil || wk.chance(3) {
		if a = wk.w.agent(wk.rng); a == nil {
			return
		}
		status = oneOf(wk, "frozen", "frozen", "active")
		if wk.chance(30) {
			status = "terminated"
		}
	}
	by := wk.overseer(a)
	_, out := wk.ctl("actor.status", status+" "+a.id, by, "actor.status", func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
		return c.SetStatus(ctx, a.id, status, "workload")
	})
	if out == "ok" {
		wk.w.setFlag(a.id, flagFrozen, status == "frozen")
		if status == "terminated" {
			wk.w.markDead(a.id)
		}
	}
}

// issueEnvelope has a human issue an envelope to an agent.
func (wk *worker) issueEnvelope() {
	a := wk.w.agent(wk.rng)
	if a == nil {
		return
	}
	wk.issueTo(wk.overseer(a), a)
}

// issueTo has by issue a an envelope of one of a few shapes.
func (wk *worker) issueTo(by, a *actor) *envelope {
	req := api.EnvelopeRequest{Holder: a.id, Budget: uint64(oneOf(wk, 200, 5000, 1_000_000, 1_000_000)), Grants: envelopeGrants}
	if !wk.chance(3) {
		req.HoldOn = holdRules
		req.HoldTimeoutSecs = uint64(oneOf(wk, 0, 2, 5, 30))
	}
	if wk.chance(8) {
		req.Expires = time.Now().Add(time.Duration(oneOf(wk, 5, 30, 120)) * time.Second).UTC().Format(time.RFC3339Nano)
	}
	req.RequireSigned = wk.chance(20)
	req.SealPayloads = wk.chance(20)
	return wk.sendEnvelope("envelope.issue", by, req)
}

// sendEnvelope issues or delegates an envelope and adds it to the world.
func (wk *worker) sendEnvelope(op string, by *actor, req api.EnvelopeRequest) *envelope {
	ctx, cancel := wk.ctx()
	defer cancel()
	v, err := by.client(wk.w, wk.rng).IssueEnvelope(ctx, req)
	problem := ""
	desc := fmt.Sprintf("envelope for %s (parent %q) by %s", req.Holder, req.Parent, by.id)
	if err == nil {
		if v.ID == "" || v.Holder != req.Holder || v.Issuer != by.id || v.Index == 0 {
			problem = fmt.Sprintf("envelope answer %+v is not the envelope asked for", *v)
		} else {
			wk.r.addAck(ack{op: op, index: v.Index, actors: actors(by.id), kinds: kinds("envelope.issued")})
		}
	}
	if out := wk.r.record(op, desc, err, problem, "ok"); out != "ok" {
		return nil
	}
	e := &envelope{id: v.ID, holder: v.Holder, issuer: v.Issuer, parent: v.Parent, holdRules: len(req.HoldOn) > 0, seals: req.SealPayloads}
	if req.Parent != "" {
		if p := wk.w.envelopeByID(req.Parent); p != nil {
			e.holdRules = e.holdRules || p.holdRules
			e.seals = e.seals || p.seals
		}
	}
	wk.w.addEnvelope(e)
	return e
}

// delegateEnvelope has an agent delegate part of an envelope it holds to
// another agent.
func (wk *worker) delegateEnvelope() {
	a := wk.w.agent(wk.rng)
	b := wk.w.agent(wk.rng)
	if a == nil || b == nil || a == b {
		return
	}
	parent := wk.w.envelopeOf(wk.rng, a.id, false)
	if parent == nil {
		return
	}
	req := api.EnvelopeRequest{Holder: b.id, Parent: parent.id, Budget: uint64(oneOf(wk, 50, 500, 2000)), Grants: delegatedGrants}
	if wk.chance(3) {
		req.HoldOn = holdRules[:1]
	}
	wk.sendEnvelope("envelope.delegate", a, req)
}

// revokeEnvelope revokes an envelope as root or its issuer.
func (wk *worker) revokeEnvelope() {
	e := wk.w.anyEnvelope(wk.rng)
	if e == nil {
		return
	}
	by := wk.w.root
	if c := wk.w.actorByID(e.issuer); c != nil && wk.chance(2) {
		by = c
	}
	_, out := wk.ctl("envelope.revoke", "revoke "+e.id, by, "envelope.revoked", func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
		return c.RevokeEnvelope(ctx, e.id, "workload")
	})
	if out == "ok" {
		wk.w.revokeEnvelope(e.id)
	}
}

// setKey registers, rotates or revokes an actor's signing key, with
// require_signed on or off, as root, the actor itself or its creator.
func (wk *worker) setKey() {
	var a *actor
	if wk.chance(2) {
		a = wk.w.humanNotRoot(wk.rng)
	}
	if a == nil {
		a = wk.w.agent(wk.rng)
	}
	if a == nil {
		return
	}
	by := wk.w.root
	switch n := wk.rng.IntN(10); {
	case n < 2:
		by = a
	case n < 3:
		if c := wk.w.actorByID(a.creator); c != nil {
			by = c
		}
	}
	wk.keyChange(by, a, !wk.chance(6), wk.chance(2))
}

// keyChange sets a's key (on: its key, else revoked) and require_signed.
func (wk *worker) keyChange(by, a *actor, on, require bool) string {
	req := api.SigningKeyRequest{Reason: "workload"}
	if on {
		req.Key, req.RequireSigned = a.vkey, require
	}
	_, out := wk.ctl("key.set", fmt.Sprintf("key of %s on=%v require_signed=%v", a.id, on, req.RequireSigned), by, "actor.key",
		func(ctx context.Context, c *client.Client) (*api.Receipt, error) {
			return c.SetSigningKey(ctx, a.id, req)
		})
	if out == "ok" {
		wk.w.setKey(a, on, req.RequireSigned)
	}
	return out
}

// setPolicy defines a policy or its next version: a default one or one of
// the workload's own.
func (wk *worker) setPolicy() {
	by := wk.w.human(wk.rng)
	if wk.chance(3) {
		name := oneOf(wk, "no_pii", "audit", "strict")
		_, out := wk.ctlC("policy.set", "default "+name, by, "policy.set",
			func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
				return c.SetDefaultPolicy(ctx, name)
			})
		if out == "ok" {
			wk.w.addPolicy(name)
		}
		return
	}
	name := oneOf(wk, "p-one", "p-two")
	spec := fmt.Sprintf(`{"name":%q,"blocked_actions":%s,"blocked_patterns":%s,"audit_all":%v,"signal_on_violation":%v}`, name,
		oneOf(wk, `[]`, `["payments/admin/x"]`, `["execute"]`), oneOf(wk, `["hunter2"]`, `["\\bssn\\b","\\d{3}-\\d{2}-\\d{4}"]`, `[]`),
		wk.chance(2), wk.chance(8))
	_, out := wk.ctlC("policy.set", "policy "+name, by, "policy.set",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.SetPolicy(ctx, name, json.RawMessage(spec))
		})
	if out == "ok" {
		wk.w.addPolicy(name)
	}
}

// attachPolicy binds a policy to an agent or an envelope, or unbinds it.
func (wk *worker) attachPolicy() {
	name := wk.w.policy(wk.rng)
	if name == "" {
		return
	}
	req := api.AttachRequest{Detach: wk.chance(2)}
	var by *actor
	if e := wk.w.anyEnvelope(wk.rng); e != nil && wk.chance(3) {
		req.Envelope = e.id
		by = wk.w.actorByID(e.issuer)
		if by == nil || by.human == false || wk.chance(3) {
			by = wk.w.root
		}
	} else {
		a := wk.w.agent(wk.rng)
		if a == nil {
			return
		}
		req.Agent, by = a.id, wk.overseer(a)
	}
	wk.ctlC("policy.attach", fmt.Sprintf("%s to %s%s detach=%v", name, req.Agent, req.Envelope, req.Detach), by, "policy.attached",
		func(ctx context.Context, c *client.Client) (*api.Controlled, error) {
			return c.AttachPolicy(ctx, name, req)
		})
}
