package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

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

// pendingHolds counts the pending holds of an envelope. The caller holds k.mu.
func (k *Kernel) pendingHolds(envelope string) int { return k.ledger.PendingHolds(envelope) }

// Holds lists holds, oldest first: all of them for root, otherwise those
// the actor may see — its own (an agent) or those it may answer (a human).
// status filters by state ("" for all).
func (k *Kernel) Holds(viewer *Actor, status string) []Hold {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Hold
	for _, h := range k.ledger.Holds {
		if status != "" && h.Status != status {
			continue
		}
		if h.Actor == viewer.ID || k.mayAnswer(viewer, h) == nil {
			out = append(out, *h)
		}
	}
	slices.SortFunc(out, func(a, b Hold) int { return int(a.RequestedAt) - int(b.RequestedAt) })
	return out
}

// mayAnswer says whether actor may answer hold h: a human, and root, the
// agent's creator, or the human who issued the root of the envelope chain.
// The caller holds k.mu.
func (k *Kernel) mayAnswer(actor *Actor, h *ledger.Hold) error {
	a, ok := k.ledger.Actors[actor.ID]
	if !ok || !a.IsHuman() {
		return fmt.Errorf("only humans answer holds; %s is not one", actor.ID)
	}
	if !a.Active() {
		return fmt.Errorf("%s is %s", a.ID, a.Status)
	}
	if a.ID == RootID {
		return nil
	}
	if agent, ok := k.ledger.Actors[h.Actor]; ok && agent.Creator == a.ID {
		return nil
	}
	if chain, err := k.ledger.Chain(h.Envelope); err == nil && chain[len(chain)-1].Issuer == a.ID {
		return nil
	}
	return fmt.Errorf("%s may not answer hold %s: only root, the agent's creator or the envelope's issuer may", a.ID, h.ID)
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

// AnswerHold is a human's answer to a hold (Def. 4.21). Approve runs the
// held action through the whole pipeline again as its agent, with the
// reservation made when it was held, and commits it as an action event
// that also closes the hold; if a gate refuses it now, or on reject, the
// hold ends as hold.answered and costs the commitment ⌈20% × reserved⌉
// (Def. 4.22). The receipt is that of the event that ended the hold.
func (k *Kernel) AnswerHold(ctx context.Context, by *Actor, id, decision, reason string) (*Receipt, error) {
	if decision != event.HoldApprove && decision != event.HoldReject {
		return nil, denyAt(StageValidate, GateForm, ErrInvalid, "decision %q is neither approve nor reject", decision)
	}
	if len(reason) > 1024 {
		return nil, denyAt(StageValidate, GateForm, ErrInvalid, "reason is longer than 1024 bytes")
	}
	if !event.ValidHoldID(id) {
		return nil, denyAt(StageValidate, GateForm, ErrInvalid, "%q is not a hold id", id)
	}
	key := "hold/" + id
	if err := k.claim(ctx, key); err != nil {
		return nil, denyAt(StageValidate, GateAuthority, ErrUnavailable, "%v", err)
	}
	defer k.unclaim(key)

	k.mu.Lock()
	h, ok := k.ledger.Holds[id]
	var err error
	switch {
	case !ok:
		err = denyAt(StageValidate, GateAuthority, ErrNotFound, "hold %s does not exist", id)
	case h.Status != ledger.HoldPending:
		err = denyAt(StageValidate, GateAuthority, ErrConflict, "hold %s is already %s", id, h.Status)
	default:
		if e := k.mayAnswer(by, h); e != nil {
			err = denyAt(StageValidate, GateAuthority, ErrForbidden, "%v", e)
		}
	}
	var hold ledger.Hold
	var agent *Actor
	if err == nil {
		hold = *h
		agent = copyActor(k.ledger.Actors[h.Actor])
	}
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	now := k.cfg.Now()
	if decision == event.HoldApprove {
		req := ActionRequest{Type: hold.Action.Type, Target: hold.Action.Target, Payload: hold.Action.Payload,
			PayloadHash: hold.Action.PayloadHash, Envelope: hold.Envelope, Session: hold.Session, Resources: hold.Action.Resources}
		r, err := k.run(ctx, &submission{k: k, actor: agent, req: req, now: now, resume: &hold, answeredBy: by.ID})
		if err == nil {
			return r, nil
		}
		d, ok := err.(*Denial)
		if !ok || d.Stage == StageAppend {
			return nil, err
		}
		reason = "approved, but refused on re-check: " + d.Error()
	}
	return k.endHold(ctx, &hold, by.ID, decision, reason, now)
}

// endHold appends the hold.answered event that ends a hold without its
// action, charging the commitment cost. The caller holds the hold's claim.
func (k *Kernel) endHold(ctx context.Context, h *ledger.Hold, by, decision, reason string, now time.Time) (*Receipt, error) {
	k.mu.Lock()
	settled := k.ledger.Energy.Commitment(h.Reserved)
	k.mu.Unlock()
	id, err := newEventID()
	if err != nil {
		return nil, err
	}
	if len(reason) > 2048 {
		reason = reason[:2048]
	}
	ev := &event.Event{V: event.Version, ID: id, Time: event.FormatTime(now), Kind: event.KindHoldAnswered, Actor: by,
		Hold: &event.Hold{ID: h.ID, Decision: decision, AnsweredBy: by, Settled: settled, Reason: reason}}
	entry, err := event.Encode(ev)
	if err != nil {
		return nil, denyAt(StageAppend, GateForm, ErrInvalid, "%v", err)
	}
	index, err := k.log.append(ctx, entry, ev)
	if err != nil {
		return nil, denyAt(StageAppend, "", ErrUnavailable, "log append failed: %v", err)
	}
	leaf := event.LeafHash(entry)
	return &Receipt{Status: StatusCommitted, HoldID: h.ID, EventID: id, Index: index, LeafHash: hex.EncodeToString(leaf[:]),
		Time: ev.Time, Actor: by, Type: h.Action.Type, Target: h.Action.Target, Envelope: h.Envelope, Cost: settled}, nil
}

// timeOutHolds ends every pending hold whose deadline has passed.
func (k *Kernel) timeOutHolds(ctx context.Context) {
	now := k.cfg.Now()
	k.mu.Lock()
	var due []string
	for id, h := range k.ledger.Holds {
		if h.Status == ledger.HoldPending && h.Deadline != "" && expiredAt(h.Deadline, now) {
			due = append(due, id)
		}
	}
	k.mu.Unlock()
	slices.Sort(due)
	for _, id := range due {
		key := "hold/" + id
		if k.claim(ctx, key) != nil {
			return
		}
		k.mu.Lock()
		h, ok := k.ledger.Holds[id]
		var hold ledger.Hold
		if ok && h.Status == ledger.HoldPending {
			hold = *h
		}
		k.mu.Unlock()
		if hold.ID != "" {
			if _, err := k.endHold(ctx, &hold, event.KernelActor, event.HoldTimeout, "no answer before "+hold.Deadline, now); err != nil {
				k.logger.Error("time out hold", "hold", id, "err", err)
			}
		}
		k.unclaim(key)
	}
}
