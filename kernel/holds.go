package kernel

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/annal-dev/annal/internal/strictjson"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// Hold is a held action as the kernel reports it.
type Hold = ledger.Hold

func newHoldID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "hold-" + hex.EncodeToString(b[:]), nil
}

// Holds lists holds, oldest first: all of them for root, otherwise those
// the actor may see — its own (an agent) or those it may answer (a human).
// status filters by state ("" for all).
func (k *Kernel) Holds(viewer *Actor, status string) []Hold {
	now := event.At(k.cfg.Now())
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Hold
	for _, h := range k.ledger.Holds {
		if status != "" && h.Status != status {
			continue
		}
		if h.Actor == viewer.ID || k.ledger.MayAnswer(viewer.ID, h, now) == nil {
			out = append(out, *h)
		}
	}
	slices.SortFunc(out, func(a, b Hold) int { return int(a.RequestedAt) - int(b.RequestedAt) })
	return out
}

// HoldContext is what an overseer needs to answer a hold: the hold rule
// that held it and how much its envelope has left.
type HoldContext struct {
	// RuleEnvelope is the envelope of the chain whose hold_on grant matched,
	// RulePattern that grant's target pattern ("" if the rule has since
	// changed, as when an envelope was revoked).
	RuleEnvelope, RulePattern string
	// Remaining is the held action's envelope's budget less what it has
	// consumed and reserved (the hold's own reservation included).
	Remaining uint64
}

// HoldContextOf returns the context of hold h as the ledger stands now.
func (k *Kernel) HoldContextOf(h Hold) HoldContext {
	k.mu.Lock()
	defer k.mu.Unlock()
	var c HoldContext
	chain, v := k.ledger.Chain(h.Envelope)
	if v != nil || len(chain) == 0 {
		return c
	}
	c.Remaining = chain[0].Remaining()
	c.RuleEnvelope, c.RulePattern = ledger.HoldRule(chain, h.Action.Type, h.Action.Target)
	return c
}

// holdAnswer is the payload of a hold answer sent as mutate ledger/hold/<id>.
type holdAnswer struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

// answerHoldAction is the paper's form of an answer: mutate ledger/hold/<id>
// with {"decision": "approve"|"reject", "reason": ...}.
func (k *Kernel) answerHoldAction(ctx context.Context, actor *Actor, id string, req ActionRequest) (*Receipt, error) {
	// Exact member names: with encoding/json, {"decision":"reject",
	// "Decision":"approve"} approved.
	var ans holdAnswer
	if req.Payload == nil {
		return nil, denyAt(StageValidate, GateForm, ErrInvalid, `a hold answer's payload is {"decision": "approve" or "reject", "reason": "..."}`)
	}
	if err := strictjson.Decode(req.Payload, &ans); err != nil {
		return nil, denyAt(StageValidate, GateForm, ErrInvalid, `a hold answer's payload is {"decision": "approve" or "reject", "reason": "..."}: %v`, err)
	}
	return k.AnswerHold(ctx, actor, id, ans.Decision, ans.Reason)
}

// MaxHoldAnswerReason bounds the reason a human gives with an answer to a
// hold, approval or rejection alike.
const MaxHoldAnswerReason = 1024

// AnswerHold is a human's answer to a hold (Def. 4.21), with its reason,
// which the log keeps whatever the answer. Approve runs the held action
// through the whole pipeline again as its agent, with the reservation made
// when it was held, and commits it as an action event that also closes the
// hold; its receipt is that event's. On reject the hold ends as
// hold.answered and costs the commitment ⌈20% × reserved⌉ (Def. 4.22); the
// receipt is that event's.
//
// If a gate refuses an approved action now (its agent frozen, its envelope
// revoked, its subject erased since it was held), the hold ends as
// hold.answered too, at the same cost, and the answer is that refusal: a
// *Denial of the gate that refused, Recorded at the index of the
// hold.answered event. An approval never answers a receipt unless the
// action is in the log.
func (k *Kernel) AnswerHold(ctx context.Context, by *Actor, id, decision, reason string) (*Receipt, error) {
	if decision != event.HoldApprove && decision != event.HoldReject {
		return nil, denyAt(StageValidate, GateForm, ErrInvalid, "decision %q is neither approve nor reject", decision)
	}
	if len(reason) > MaxHoldAnswerReason {
		return nil, denyAt(StageValidate, GateForm, ErrInvalid, "reason is longer than %d bytes", MaxHoldAnswerReason)
	}
	reason = string(bytes.ToValidUTF8([]byte(reason), nil))
	if !event.ValidHoldID(id) {
		return nil, denyAt(StageValidate, GateForm, ErrInvalid, "%q is not a hold id", id)
	}
	k.mu.Lock()
	h, ok := k.ledger.Holds[id]
	hold := ledger.Hold{ID: id} // the rule refuses a hold that does not exist
	if ok {
		hold = *h
	}
	k.mu.Unlock()
	if decision == event.HoldReject || !ok {
		return k.endHold(ctx, &hold, by.ID, decision, reason)
	}
	agent := &Actor{ActorRecord: event.ActorRecord{ID: hold.Actor}}
	req := ActionRequest{Type: hold.Action.Type, Target: hold.Action.Target, Envelope: hold.Envelope, Session: hold.Session}
	r, err := k.act(ctx, agent, req, hold.Action, &event.Hold{ID: id, Decision: event.HoldApprove, AnsweredBy: by.ID, Reason: reason})
	if err == nil {
		r.Reason = reason
		return r, nil
	}
	var d *Denial
	if !errors.As(err, &d) || d.Stage == StageAppend || d.Class == ErrUnavailable || d.Retryable {
		return nil, err // nothing was decided: the hold stays pending
	}
	logged := "approved, but refused on re-check: " + d.Error()
	if reason != "" {
		logged = "approved (" + reason + "), but refused on re-check: " + d.Error()
	}
	rc, err := k.endHold(ctx, &hold, by.ID, decision, logged)
	if err != nil {
		return nil, err
	}
	return nil, &Denial{Stage: d.Stage, Gate: d.Gate, Class: d.Class, Policy: d.Policy, Code: d.Code, Recorded: true, Index: rc.Index,
		Reason: fmt.Sprintf("hold %s approved, but refused on re-check: %s; the hold ended at entry %d without its action, charging its commitment of %d",
			id, d.Reason, rc.Index, rc.Cost)}
}

// endHold appends the hold.answered event that ends a hold without its
// action, charging the commitment cost.
func (k *Kernel) endHold(ctx context.Context, h *ledger.Hold, by, decision, reason string) (*Receipt, error) {
	if len(reason) > 2048 {
		reason = reason[:2048]
	}
	reason = string(bytes.ToValidUTF8([]byte(reason), nil))
	d, err := k.decide(ctx, StageValidate, func(l *ledger.Ledger, _ event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindHoldAnswered, Actor: by,
			Hold: &event.Hold{ID: h.ID, Decision: decision, AnsweredBy: by, Settled: l.Energy.Commitment(h.Reserved), Reason: reason}}, nil
	})
	if err != nil {
		return nil, err
	}
	rc := receiptOf(d, h.Action.Type, h.Action.Target)
	rc.HoldID, rc.Envelope, rc.Cost, rc.Reason = h.ID, h.Envelope, d.ev.Hold.Settled, reason
	return rc, nil
}

// timeOutHolds ends every pending hold whose deadline has passed.
func (k *Kernel) timeOutHolds(ctx context.Context) {
	now := event.At(k.cfg.Now())
	k.mu.Lock()
	var due []ledger.Hold
	for _, h := range k.ledger.Holds {
		if h.Status == ledger.HoldPending && h.Deadline.ReachedBy(now) {
			due = append(due, *h)
		}
	}
	k.mu.Unlock()
	slices.SortFunc(due, func(a, b ledger.Hold) int { return int(a.RequestedAt) - int(b.RequestedAt) })
	for _, h := range due {
		_, err := k.endHold(ctx, &h, event.KernelActor, event.HoldTimeout, "no answer before "+h.Deadline.String())
		switch {
		case err == nil, errors.Is(err, ErrConflict):
		case errors.Is(err, ErrUnavailable):
			return // the kernel has stopped taking work
		default:
			k.logger.Error("time out hold", "hold", h.ID, "err", err)
		}
	}
}
