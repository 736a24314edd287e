package kernel

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/ring"
)

// Actor is an actor as the ledger knows it: record, status and energy.
type Actor = ledger.Actor

// copyActor returns a copy that stays valid after the kernel's lock is
// released.
func copyActor(a *Actor) *Actor {
	c := *a
	return &c
}

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
	// Share is the actor's share of energy production, given from the
	// creator's own (default 0: the creator funds the actor with Energy).
	Share *uint64 `json:"share,omitempty"`
	// Trust, if set, is the agent's effective trust score (0.0–1.0) and
	// Consensus whether it has consensus: the ring they give is recorded
	// right after the agent (an agent.ring event). Without it the agent
	// starts in Ring 3, the sandbox (Execution Control §3.3).
	Trust     *float64 `json:"trust,omitempty"`
	Consensus bool     `json:"consensus,omitempty"`
	// SigningKey, if set, is the actor's signing key from its creation (a
	// signed-note Ed25519 verifier key), and RequireSigned makes every
	// request of the actor need a signature by it.
	SigningKey    string `json:"signing_key,omitempty"`
	RequireSigned bool   `json:"require_signed,omitempty"`
	// SealPayloads: the actor's action payloads are kept sealed beside
	// the log, under the subject each action names (sealed.go).
	SealPayloads bool `json:"seal_payloads,omitempty"`
}

// MaxShare bounds an actor's share of energy production: all of root's at
// genesis.
const MaxShare = ledger.GenesisShare

// NewAgent is a created actor with its credential. The credential is shown
// once: the kernel keeps only its hash.
type NewAgent struct {
	Actor      *Actor `json:"actor"`
	Credential string `json:"credential"`
	Index      uint64 `json:"index"`
}

// CreateAgent creates an actor on behalf of creator, who MUST be a human
// (Remark 4.3: only humans create agents; only root creates humans), within
// the creator's grants, with energy and a share of production the creator
// gives from its own. The actor.created event is durable and folded before
// the credential is returned.
func (k *Kernel) CreateAgent(ctx context.Context, creator *Actor, req ActorRequest) (*NewAgent, error) {
	const stage = "create_actor"
	if req.Kind == "" {
		req.Kind = event.Agent
	}
	rec, err := actorRecord(stage, creator.ID, req, k.cfg.Now())
	if err != nil {
		return nil, err
	}
	if err := k.checkTrustAtCreation(stage, creator.ID, req); err != nil {
		return nil, err
	}
	cred, err := newCredential()
	if err != nil {
		return nil, err
	}
	rec.CredentialSHA256 = event.CredentialHash(cred)
	d, err := k.decide(ctx, stage, func(l *ledger.Ledger, _ event.Instant) (*event.Event, error) {
		if rec.ID == "" {
			id, err := k.newActorID(req.Kind)
			if err != nil {
				return nil, err
			}
			rec.ID = id
		}
		return &event.Event{Kind: event.KindActorCreated, Actor: creator.ID, Subject: &rec}, nil
	})
	k.mu.Lock()
	delete(k.ids, rec.ID)
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	k.logger.Info("actor created", "actor", rec.ID, "kind", rec.Kind, "creator", creator.ID, "index", d.index)
	if req.Trust != nil {
		// A crash before this event leaves the agent in Ring 3 and its
		// credential unseen: the least privilege, and nothing lost.
		if _, err := k.AssignRing(ctx, creator, rec.ID, RingAssignment{Trust: *req.Trust, Consensus: req.Consensus, Reason: "trust at creation"}); err != nil {
			return nil, err
		}
	}
	a, err := k.Actor(rec.ID)
	if err != nil {
		// Written, but not folded: the kernel stopped right after.
		a = &Actor{ActorRecord: rec, Status: event.StatusActive, CreatedAt: d.index, Balance: rec.Energy}
	}
	return &NewAgent{Actor: a, Credential: cred, Index: d.index}, nil
}

// actorRecord is the actor.created record a request asks for, its form
// checked: kind, share, expiry, grants and the trust score's range.
func actorRecord(stage, creator string, req ActorRequest, now time.Time) (event.ActorRecord, error) {
	rec := event.ActorRecord{Kind: req.Kind, Name: req.Name, Purpose: req.Purpose, Creator: creator, Energy: req.Energy,
		SigningKey: req.SigningKey, RequireSigned: req.RequireSigned, SealPayloads: req.SealPayloads}
	switch {
	case req.Kind != event.Agent && req.Kind != event.Human:
		return rec, formError(stage, "kind %q is neither agent nor human", req.Kind)
	case req.Share != nil && *req.Share > MaxShare:
		return rec, formError(stage, "share %d is more than %d", *req.Share, MaxShare)
	case req.Share != nil:
		rec.Share = *req.Share
	}
	if req.Expires != "" {
		t, err := time.Parse(time.RFC3339Nano, req.Expires)
		if err != nil || t.Year() > 9999 {
			return rec, formError(stage, "expires %q is not an RFC 3339 time", req.Expires)
		}
		if !t.After(now) {
			return rec, formError(stage, "expires %s is not in the future", req.Expires)
		}
		rec.Expires = event.At(t)
	}
	grants, err := normalizeGrants(req.Grants)
	if err != nil {
		return rec, formError(stage, "grants: %v", err)
	}
	rec.Grants = grants
	if req.Trust != nil {
		if req.Kind != event.Agent {
			return rec, formError(stage, "a trust score is for agents: humans stand outside the rings")
		}
		if _, err := ring.ScoreFromFloat(*req.Trust); err != nil {
			return rec, formError(stage, "trust: %v", err)
		}
	}
	return rec, nil
}

// checkTrustAtCreation refuses a trust score given at creation by a human
// who signs its requests: the trust is a second event (agent.ring), which
// the one signature of this request cannot cover.
func (k *Kernel) checkTrustAtCreation(stage, creator string, req ActorRequest) error {
	if req.Trust == nil {
		return nil
	}
	k.mu.RLock()
	c, ok := k.ledger.Actors[creator]
	mustSign := ok && c.RequireSigned
	k.mu.RUnlock()
	if mustSign {
		return formError(stage, "%s signs its requests: give the agent its trust with a signed request of its own (POST /v1/agents/{id}/ring)", creator)
	}
	return nil
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

// Actors lists the actors viewer may see, by id: itself, those it created,
// and, for root, everyone (the visibility of Actor over the API).
func (k *Kernel) Actors(viewer *Actor) []*Actor {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*Actor
	for _, a := range k.ledger.Actors {
		if viewer.ID == RootID || a.ID == viewer.ID || a.Creator == viewer.ID {
			out = append(out, copyActor(a))
		}
	}
	slices.SortFunc(out, func(a, b *Actor) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// newActorID picks an id no actor has and no creation in flight took.
// The caller holds k.mu.
func (k *Kernel) newActorID(kind event.ActorKind) (string, error) {
	for {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id := string(kind) + "-" + hex.EncodeToString(b[:])
		if _, taken := k.ledger.Actors[id]; !taken && !k.ids[id] {
			k.ids[id] = true
			return id, nil
		}
	}
}

// SetStatus freezes, unfreezes or terminates an agent. Only a human may,
// root or the agent's creator; humans are never frozen or terminated
// (Axiom 4.1), and termination is final.
func (k *Kernel) SetStatus(ctx context.Context, by *Actor, actorID, status, reason string) (*Receipt, error) {
	const stage = "actor_status"
	d, err := k.decide(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindActorStatus, Actor: by.ID, Status: &event.StatusChange{Actor: actorID, Status: status, Reason: reason}}, nil
	})
	if err != nil {
		return nil, err
	}
	if status != event.StatusActive {
		k.forgetAgent(actorID)
	}
	return receiptOf(d, "", ""), nil
}

// newCredential returns a fresh bearer credential: "annal_" and 256 random
// bits in unpadded base64url.
func newCredential() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "annal_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}
