package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/ring"
)

// ActorRequest describes an actor to create.
type ActorRequest struct {
	// Kind is "agent" (the default) or "human"; only root creates humans.
	Kind    event.ActorKind `json:"kind,omitempty"`
	Name    string          `json:"name"`
	Purpose string          `json:"purpose"`
	// Expires, if set, is when an agent stops being able to act (RFC 3339).
	Expires string `json:"expires,omitempty"`
	// Grants are the actor's writable targets W(p); they must lie within the
	// creator's own. None means the actor may only observe.
	Grants []event.Grant `json:"grants,omitempty"`
	// Energy is given from the creator's balance to the new actor.
	Energy uint64 `json:"energy,omitempty"`
	// Share is the actor's share of energy production (default: 1 for a
	// human, 0 for an agent, which its creator funds).
	Share *uint64 `json:"share,omitempty"`
	// Trust, if set, is the agent's effective trust score (0.0–1.0) and
	// Consensus whether it has consensus: the ring they give is recorded
	// right after the agent (an agent.ring event). Without it the agent
	// starts in Ring 3, the sandbox (Execution Control §3.3).
	Trust     *float64 `json:"trust,omitempty"`
	Consensus bool     `json:"consensus,omitempty"`
}

// MaxShare bounds an actor's share of energy production.
const MaxShare = 1 << 20

// AgentRequest is the request of earlier versions: an agent with no grants.
type AgentRequest = ActorRequest

// NewAgent is a created actor with its credential. The credential is shown
// once: the kernel keeps only its hash.
type NewAgent struct {
	Actor      *Actor `json:"actor"`
	Credential string `json:"credential"`
	Index      uint64 `json:"index"`
}

// CreateAgent creates an actor on behalf of creator, who MUST be a human
// (Remark 4.3: only humans create agents; only root creates humans). The
// actor.created event is durable and folded before the credential is
// returned.
func (k *Kernel) CreateAgent(ctx context.Context, creator *Actor, req ActorRequest) (*NewAgent, error) {
	const stage = "create_actor"
	if req.Kind == "" {
		req.Kind = event.Agent
	}
	now := k.cfg.Now()
	rec := event.ActorRecord{Kind: req.Kind, Name: req.Name, Purpose: req.Purpose, Creator: creator.ID, Energy: req.Energy}
	switch {
	case req.Kind != event.Agent && req.Kind != event.Human:
		return nil, denyAt(stage, GateForm, ErrInvalid, "kind %q is neither agent nor human", req.Kind)
	case req.Share != nil && *req.Share > MaxShare:
		return nil, denyAt(stage, GateForm, ErrInvalid, "share %d is more than %d", *req.Share, MaxShare)
	case req.Share != nil:
		rec.Share = *req.Share
	case req.Kind == event.Human:
		rec.Share = 1
	}
	if req.Expires != "" {
		t, err := time.Parse(time.RFC3339Nano, req.Expires)
		if err != nil {
			return nil, denyAt(stage, GateForm, ErrInvalid, "expires %q is not an RFC 3339 time", req.Expires)
		}
		if !t.After(now) {
			return nil, denyAt(stage, GateForm, ErrInvalid, "expires %s is not in the future", req.Expires)
		}
		rec.Expires = event.FormatTime(t)
	}
	grants, err := normalizeGrants(req.Grants)
	if err != nil {
		return nil, denyAt(stage, GateForm, ErrInvalid, "grants: %v", err)
	}
	rec.Grants = grants
	if req.Trust != nil {
		if req.Kind != event.Agent {
			return nil, denyAt(stage, GateForm, ErrInvalid, "a trust score is for agents: humans stand outside the rings")
		}
		if _, err := ring.ScoreFromFloat(*req.Trust); err != nil {
			return nil, denyAt(stage, GateForm, ErrInvalid, "trust: %v", err)
		}
	}
	cred, err := newCredential()
	if err != nil {
		return nil, err
	}
	rec.CredentialSHA256 = event.CredentialHash(cred)
	id, err := newEventID()
	if err != nil {
		return nil, err
	}

	k.mu.Lock()
	c, ok := k.ledger.Actors[creator.ID]
	switch {
	case !ok:
		err = denyAt(stage, GateActor, ErrUnauthenticated, "actor %s does not exist", creator.ID)
	case !c.IsHuman():
		err = denyAt(stage, GateAuthority, ErrForbidden, "actor %s is an agent; only humans create agents (Remark 4.3)", c.ID)
	case !c.Active():
		err = denyAt(stage, GateActor, ErrForbidden, "actor %s is %s", c.ID, c.Status)
	case req.Kind == event.Human && c.ID != RootID:
		err = denyAt(stage, GateAuthority, ErrForbidden, "only root creates humans")
	}
	if err == nil {
		if e := covers(c.Grants, grants); e != nil {
			err = denyAt(stage, GateBoundary, ErrForbidden, "grants: %v", e)
		}
	}
	var r *reservation
	if err == nil && req.Energy > 0 {
		if have := c.Available() - min(c.Available(), k.flight.actor[c.ID]); have < req.Energy {
			err = denyAt(stage, GateEnergy, ErrInsufficientEnergy, "%s gives %d energy but has %d available", c.ID, req.Energy, have)
		} else {
			r = &reservation{actor: c.ID, amount: req.Energy}
			k.flight.reserve(*r)
		}
	}
	if err == nil {
		rec.ID, err = k.newActorID(req.Kind)
	}
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		if r != nil {
			k.flight.release(*r)
		}
		delete(k.flight.ids, rec.ID)
		k.mu.Unlock()
	}()
	if err != nil {
		return nil, err
	}
	ev := &event.Event{V: event.Version, ID: id, Time: event.FormatTime(now), Kind: event.KindActorCreated, Actor: creator.ID, Subject: &rec}
	if _, err := event.Encode(ev); err != nil {
		return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	index, err := k.appendEvent(ctx, ev)
	if err != nil {
		return nil, denyAt(stage, "", ErrUnavailable, "append actor.created: %v", err)
	}
	k.logger.Info("actor created", "actor", rec.ID, "kind", rec.Kind, "creator", creator.ID, "index", index)
	if req.Trust != nil {
		// A crash before this event leaves the agent in Ring 3 and its
		// credential unseen: the least privilege, and nothing lost.
		if _, err := k.AssignRing(ctx, creator, rec.ID, RingAssignment{Trust: *req.Trust, Consensus: req.Consensus, Reason: "trust at creation"}); err != nil {
			return nil, err
		}
	}
	a, _ := k.Actor(rec.ID)
	return &NewAgent{Actor: a, Credential: cred, Index: index}, nil
}

// Actor returns a copy of the actor with this id.
func (k *Kernel) Actor(id string) (*Actor, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	a, ok := k.ledger.Actors[id]
	if !ok {
		return nil, fmt.Errorf("actor %q: %w", id, ErrNotFound)
	}
	return copyActor(a), nil
}

// newActorID picks an id no actor has and no in-flight creation took. The
// caller holds k.mu.
func (k *Kernel) newActorID(kind event.ActorKind) (string, error) {
	for {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id := string(kind) + "-" + hex.EncodeToString(b[:])
		if _, taken := k.ledger.Actors[id]; !taken && !k.flight.ids[id] {
			k.flight.ids[id] = true
			return id, nil
		}
	}
}

// SetStatus freezes, unfreezes or terminates an agent. Only a human may,
// root or the agent's creator; humans are never frozen or terminated
// (Axiom 4.1), and termination is final.
func (k *Kernel) SetStatus(ctx context.Context, by *Actor, actorID, status, reason string) (*Receipt, error) {
	const stage = "actor_status"
	switch status {
	case event.StatusActive, event.StatusFrozen, event.StatusTerminated:
	default:
		return nil, denyAt(stage, GateForm, ErrInvalid, "status %q is not active, frozen or terminated", status)
	}
	if len(reason) > 1024 {
		return nil, denyAt(stage, GateForm, ErrInvalid, "reason is longer than 1024 bytes")
	}
	key := "actor/" + actorID
	if err := k.claim(ctx, key); err != nil {
		return nil, denyAt(stage, "", ErrUnavailable, "%v", err)
	}
	defer k.unclaim(key)
	k.mu.Lock()
	b, okb := k.ledger.Actors[by.ID]
	a, ok := k.ledger.Actors[actorID]
	var err error
	switch {
	case !okb || !b.IsHuman() || !b.Active():
		err = denyAt(stage, GateAuthority, ErrForbidden, "only an active human changes an actor's status")
	case !ok:
		err = denyAt(stage, GateAuthority, ErrNotFound, "actor %s does not exist", actorID)
	case a.IsHuman():
		err = denyAt(stage, GateAuthority, ErrForbidden, "%s is a human: humans cannot be frozen, demoted or deleted (Axiom 4.1)", a.ID)
	case b.ID != RootID && a.Creator != b.ID:
		err = denyAt(stage, GateAuthority, ErrForbidden, "only root or %s's creator changes its status", a.ID)
	case a.Status == event.StatusTerminated:
		err = denyAt(stage, GateAuthority, ErrConflict, "%s is terminated; that is final", a.ID)
	case a.Status == status:
		err = denyAt(stage, GateAuthority, ErrConflict, "%s is already %s", a.ID, status)
	}
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	id, err := newEventID()
	if err != nil {
		return nil, err
	}
	ev := &event.Event{V: event.Version, ID: id, Time: event.FormatTime(k.cfg.Now()), Kind: event.KindActorStatus, Actor: by.ID,
		Status: &event.StatusChange{Actor: actorID, Status: status, Reason: reason}}
	return k.appendControl(ctx, stage, ev, "", "")
}

// appendControl appends a control event and returns its receipt.
func (k *Kernel) appendControl(ctx context.Context, stage string, ev *event.Event, t event.ActionType, target string) (*Receipt, error) {
	entry, err := event.Encode(ev)
	if err != nil {
		return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	index, err := k.log.append(ctx, entry, ev)
	if err != nil {
		return nil, denyAt(stage, "", ErrUnavailable, "log append failed: %v", err)
	}
	leaf := event.LeafHash(entry)
	return &Receipt{Status: StatusCommitted, EventID: ev.ID, Index: index, LeafHash: hex.EncodeToString(leaf[:]),
		Time: ev.Time, Actor: ev.Actor, Type: t, Target: target}, nil
}
