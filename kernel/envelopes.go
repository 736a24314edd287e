package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// Envelope is an envelope as the kernel reports it.
type Envelope = ledger.Envelope

// EnvelopeRequest asks for an envelope (Def. 4.13). A human issues one to
// an agent within the human's own writable targets; an agent delegates
// part of an envelope it holds (Parent) to another existing agent, within
// what that envelope has left (Remark 4.3).
type EnvelopeRequest struct {
	Holder          string        `json:"holder"`
	Parent          string        `json:"parent,omitempty"`
	Budget          uint64        `json:"budget"`
	Grants          []event.Grant `json:"grants"`
	HoldOn          []event.Grant `json:"hold_on,omitempty"`
	HoldTimeoutSecs uint64        `json:"hold_timeout_secs,omitempty"`
	Expires         string        `json:"expires,omitempty"`
	// RequireSigned: actions under the envelope must be signed by their
	// actor.
	RequireSigned bool `json:"require_signed,omitempty"`
	// SealPayloads: payloads of actions under the envelope are kept sealed
	// beside the log (sealed.go).
	SealPayloads bool `json:"seal_payloads,omitempty"`
}

// IssueEnvelope issues an envelope on behalf of issuer. A delegated
// envelope's grants must be covered by its parent's, pattern by pattern;
// its budget must fit what the parent has left, and its expiry may not
// outlast the parent's. Hold rules of every ancestor keep applying to it.
func (k *Kernel) IssueEnvelope(ctx context.Context, issuer *Actor, req EnvelopeRequest) (*Envelope, *Receipt, error) {
	const stage = "issue_envelope"
	grants, err := normalizeGrants(req.Grants)
	if err != nil {
		return nil, nil, formError(stage, "grants: %v", err)
	}
	holdOn, err := normalizeGrants(req.HoldOn)
	if err != nil {
		return nil, nil, formError(stage, "hold_on: %v", err)
	}
	env := event.Envelope{Holder: req.Holder, Issuer: issuer.ID, Parent: req.Parent, Budget: req.Budget,
		Grants: grants, HoldOn: holdOn, HoldTimeoutSecs: req.HoldTimeoutSecs, RequireSigned: req.RequireSigned, SealPayloads: req.SealPayloads}
	if req.Expires != "" {
		t, err := time.Parse(time.RFC3339Nano, req.Expires)
		if err != nil || t.Year() > 9999 || !t.After(k.cfg.Now()) {
			return nil, nil, formError(stage, "expires %q is not a future RFC 3339 time", req.Expires)
		}
		env.Expires = event.At(t)
	}
	if req.Budget > event.MaxEnergy || req.HoldTimeoutSecs > 10*365*24*3600 {
		return nil, nil, formError(stage, "budget or hold timeout out of range")
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, err
	}
	env.ID = "env-" + hex.EncodeToString(b[:])
	d, err := k.decide(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindEnvelopeIssued, Actor: issuer.ID, Envelope: &env}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	v, err := k.Envelope(env.ID)
	return v, receiptOf(d, "", ""), err
}

// Envelope returns a copy of an envelope.
func (k *Kernel) Envelope(id string) (*Envelope, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.ledger.Envelopes[id]
	if !ok {
		return nil, denyAt("envelope", GateEnvelope, ErrNotFound, "envelope %s does not exist", id)
	}
	c := *v
	return &c, nil
}

// Envelopes lists the envelopes an actor holds or issued (all for root).
func (k *Kernel) Envelopes(viewer *Actor) []Envelope {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Envelope
	for _, v := range k.ledger.Envelopes {
		if viewer.ID == RootID || v.Holder == viewer.ID || v.Issuer == viewer.ID {
			out = append(out, *v)
		}
	}
	slices.SortFunc(out, func(a, b Envelope) int { return int(a.IssuedAt) - int(b.IssuedAt) })
	return out
}

// RevokeEnvelope revokes an envelope; its sub-envelopes stop working with
// it. Its issuer, root, or the human at the root of its chain may revoke.
// No action under it is decided after the revocation, nor logged after it.
func (k *Kernel) RevokeEnvelope(ctx context.Context, by *Actor, id, reason string) (*Receipt, error) {
	const stage = "revoke_envelope"
	d, err := k.decide(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindEnvelopeRevoked, Actor: by.ID, EnvelopeEnd: &event.EnvelopeEnd{ID: id, Reason: reason}}, nil
	})
	if err != nil {
		return nil, err
	}
	return receiptOf(d, "", ""), nil
}
