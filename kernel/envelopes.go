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
}

// IssueEnvelope issues an envelope on behalf of issuer. A delegated
// envelope's grants must be covered by its parent's, pattern by pattern;
// its budget must fit what the parent has left, and its expiry may not
// outlast the parent's. Hold rules of every ancestor keep applying to it.
func (k *Kernel) IssueEnvelope(ctx context.Context, issuer *Actor, req EnvelopeRequest) (*Envelope, *Receipt, error) {
	const stage = "issue_envelope"
	now := k.cfg.Now()
	grants, err := normalizeGrants(req.Grants)
	if err != nil {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "grants: %v", err)
	}
	if len(grants) == 0 {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "an envelope must grant something")
	}
	holdOn, err := normalizeGrants(req.HoldOn)
	if err != nil {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "hold_on: %v", err)
	}
	env := event.Envelope{Holder: req.Holder, Issuer: issuer.ID, Parent: req.Parent, Budget: req.Budget,
		Grants: grants, HoldOn: holdOn, HoldTimeoutSecs: req.HoldTimeoutSecs}
	if req.Expires != "" {
		t, err := time.Parse(time.RFC3339Nano, req.Expires)
		if err != nil || !t.After(now) {
			return nil, nil, denyAt(stage, GateForm, ErrInvalid, "expires %q is not a future RFC 3339 time", req.Expires)
		}
		env.Expires = event.FormatTime(t)
	}
	if req.Budget > event.MaxEnergy || req.HoldTimeoutSecs > 10*365*24*3600 {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "budget or hold timeout out of range")
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, err
	}
	env.ID = "env-" + hex.EncodeToString(b[:])

	k.mu.Lock()
	var r *reservation
	err = k.checkIssue(stage, issuer.ID, &env, now)
	if err == nil && env.Parent != "" {
		// Keep the budget from the parent until the envelope is folded, so
		// that spending decided meanwhile cannot leave the parent unable to
		// cover it.
		chain, _ := k.ledger.Chain(env.Parent)
		r = &reservation{amount: env.Budget}
		for _, v := range chain {
			r.envelopes = append(r.envelopes, v.ID)
		}
		k.flight.reserve(*r)
	}
	k.mu.Unlock()
	if r != nil {
		defer func() {
			k.mu.Lock()
			k.flight.release(*r)
			k.mu.Unlock()
		}()
	}
	if err != nil {
		return nil, nil, err
	}
	id, err := newEventID()
	if err != nil {
		return nil, nil, err
	}
	ev := &event.Event{V: event.Version, ID: id, Time: event.FormatTime(now), Kind: event.KindEnvelopeIssued, Actor: issuer.ID, Envelope: &env}
	rc, err := k.appendControl(ctx, stage, ev, "", "")
	if err != nil {
		return nil, nil, err
	}
	v, err := k.Envelope(env.ID)
	return v, rc, err
}

// checkIssue applies the rules of IssueEnvelope. The caller holds k.mu.
func (k *Kernel) checkIssue(stage, issuerID string, env *event.Envelope, now time.Time) error {
	issuer, ok := k.ledger.Actors[issuerID]
	if !ok || !issuer.Active() {
		return denyAt(stage, GateActor, ErrForbidden, "issuer %s is not an active actor", issuerID)
	}
	holder, ok := k.ledger.Actors[env.Holder]
	switch {
	case !ok:
		return denyAt(stage, GateAuthority, ErrNotFound, "holder %s does not exist", env.Holder)
	case holder.IsHuman():
		return denyAt(stage, GateAuthority, ErrInvalid, "envelopes are for agents; %s is a human", holder.ID)
	case !holder.Active():
		return denyAt(stage, GateAuthority, ErrForbidden, "holder %s is %s", holder.ID, holder.Status)
	case holder.ID == issuer.ID:
		return denyAt(stage, GateAuthority, ErrForbidden, "%s cannot issue an envelope to itself", issuer.ID)
	}
	if issuer.IsHuman() {
		if env.Parent != "" {
			return denyAt(stage, GateForm, ErrInvalid, "a human issues envelopes from its own authority; parent is for agents delegating")
		}
		if issuer.ID != RootID && holder.Creator != issuer.ID {
			return denyAt(stage, GateAuthority, ErrForbidden, "only root or %s's creator issues it envelopes", holder.ID)
		}
		if err := covers(issuer.Grants, env.Grants); err != nil {
			return denyAt(stage, GateBoundary, ErrForbidden, "grants: %v (Def. 4.13: targets × actions ⊆ W(issuer))", err)
		}
		return nil
	}
	// An agent delegates an envelope it holds.
	if env.Parent == "" {
		return denyAt(stage, GateAuthority, ErrForbidden, "agent %s may only delegate an envelope it holds (name it as parent)", issuer.ID)
	}
	chain, err := k.ledger.Chain(env.Parent)
	if err != nil {
		return denyAt(stage, GateEnvelope, ErrNotFound, "%v", err)
	}
	if len(chain) >= ledger.MaxChain {
		return denyAt(stage, GateEnvelope, ErrForbidden, "delegation deeper than %d", ledger.MaxChain)
	}
	parent := chain[0]
	if parent.Holder != issuer.ID {
		return denyAt(stage, GateEnvelope, ErrForbidden, "envelope %s is not held by %s", parent.ID, issuer.ID)
	}
	for _, v := range chain {
		if v.Revoked || envelopeExpired(v, now) {
			return denyAt(stage, GateEnvelope, ErrForbidden, "envelope %s is no longer live", v.ID)
		}
	}
	if err := covers(parent.Grants, env.Grants); err != nil {
		return denyAt(stage, GateEnvelope, ErrForbidden, "grants: %v (a sub-envelope is a subset of its parent, Remark 4.3)", err)
	}
	for _, v := range chain {
		if have := v.Remaining() - min(v.Remaining(), k.flight.envelope[v.ID]); env.Budget > have {
			return denyAt(stage, GateEnergy, ErrInsufficientEnergy, "budget %d exceeds what envelope %s has left (%d)", env.Budget, v.ID, have)
		}
		if v.Expires != "" && (env.Expires == "" || env.Expires > v.Expires) {
			return denyAt(stage, GateEnvelope, ErrForbidden, "a sub-envelope may not outlast %s, which expires at %s", v.ID, v.Expires)
		}
	}
	return nil
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
func (k *Kernel) RevokeEnvelope(ctx context.Context, by *Actor, id, reason string) (*Receipt, error) {
	const stage = "revoke_envelope"
	if !event.ValidEnvelopeID(id) || len(reason) > 1024 {
		return nil, denyAt(stage, GateForm, ErrInvalid, "bad envelope id or reason")
	}
	key := "envelope/" + id
	if err := k.claim(ctx, key); err != nil {
		return nil, denyAt(stage, "", ErrUnavailable, "%v", err)
	}
	defer k.unclaim(key)
	k.mu.Lock()
	var err error
	chain, cerr := k.ledger.Chain(id)
	switch {
	case cerr != nil:
		err = denyAt(stage, GateEnvelope, ErrNotFound, "%v", cerr)
	case chain[0].Revoked:
		err = denyAt(stage, GateEnvelope, ErrConflict, "envelope %s is already revoked", id)
	case by.ID != RootID && chain[0].Issuer != by.ID && chain[len(chain)-1].Issuer != by.ID:
		err = denyAt(stage, GateAuthority, ErrForbidden, "only root, the issuer or the human at the root of its chain revokes envelope %s", id)
	}
	if a, ok := k.ledger.Actors[by.ID]; err == nil && (!ok || !a.Active()) {
		err = denyAt(stage, GateActor, ErrForbidden, "%s is not active", by.ID)
	}
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	evID, err := newEventID()
	if err != nil {
		return nil, err
	}
	ev := &event.Event{V: event.Version, ID: evID, Time: event.FormatTime(k.cfg.Now()), Kind: event.KindEnvelopeRevoked, Actor: by.ID,
		EnvelopeEnd: &event.EnvelopeEnd{ID: id, Reason: reason}}
	return k.appendControl(ctx, stage, ev, "", "")
}
