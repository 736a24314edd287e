package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/annal-dev/annal/kernel/event"
)

// AgentRequest describes an agent to create.
type AgentRequest struct {
	Name    string `json:"name"`
	Purpose string `json:"purpose"`
	// Expires, if set, is when the agent stops being able to act (RFC 3339).
	Expires string `json:"expires,omitempty"`
}

// NewAgent is a created agent with its credential. The credential is shown
// once: the kernel keeps only its hash.
type NewAgent struct {
	Actor      *Actor `json:"actor"`
	Credential string `json:"credential"`
	Index      uint64 `json:"index"`
}

// CreateAgent creates an agent on behalf of creator, who MUST be a human
// (Axiom 4.1: only humans create agents). The actor.created event is durable
// and folded into state before the credential is returned.
func (k *Kernel) CreateAgent(ctx context.Context, creator *Actor, req AgentRequest) (*NewAgent, error) {
	const stage = "create_agent"
	c, ok := k.state.actor(creator.ID)
	if !ok {
		return nil, deny(stage, ErrUnauthenticated, "actor %s does not exist", creator.ID)
	}
	if !c.IsHuman() {
		return nil, deny(stage, ErrForbidden, "actor %s is an agent; only humans create agents", c.ID)
	}
	now := k.cfg.Now()
	rec := event.ActorRecord{Kind: event.Agent, Name: req.Name, Purpose: req.Purpose, Creator: c.ID}
	if req.Expires != "" {
		t, err := time.Parse(time.RFC3339Nano, req.Expires)
		if err != nil {
			return nil, deny(stage, ErrInvalid, "expires %q is not an RFC 3339 time", req.Expires)
		}
		if !t.After(now) {
			return nil, deny(stage, ErrInvalid, "expires %s is not in the future", req.Expires)
		}
		rec.Expires = event.FormatTime(t)
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

	k.createMu.Lock()
	defer k.createMu.Unlock()
	if rec.ID, err = k.newActorID(); err != nil {
		return nil, err
	}
	ev := &event.Event{V: event.Version, ID: id, Time: event.FormatTime(now), Kind: event.KindActorCreated, Actor: c.ID, Subject: &rec}
	if _, err := event.Encode(ev); err != nil {
		return nil, deny(stage, ErrInvalid, "%v", err)
	}
	index, err := k.appendAndFold(ctx, ev)
	if err != nil {
		return nil, deny(stage, ErrUnavailable, "append actor.created: %v", err)
	}
	a, _ := k.state.actor(rec.ID)
	k.logger.Info("agent created", "agent", rec.ID, "creator", c.ID, "index", index)
	return &NewAgent{Actor: a, Credential: cred, Index: index}, nil
}

// Actor returns the actor with this id.
func (k *Kernel) Actor(id string) (*Actor, error) {
	a, ok := k.state.actor(id)
	if !ok {
		return nil, fmt.Errorf("actor %q: %w", id, ErrNotFound)
	}
	return a, nil
}

// newActorID picks an unused agent id. The caller holds createMu.
func (k *Kernel) newActorID() (string, error) {
	for {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id := "agent-" + hex.EncodeToString(b[:])
		if _, taken := k.state.actor(id); !taken {
			return id, nil
		}
	}
}
