package kernel

import (
	"context"
	"sync/atomic"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// RequestSignature is a signed request as the HTTP layer received it
// (kernel/event/signed.go): By is the authenticated actor who signed,
// Request the canonical {method, path, body}. The kernel does not trust
// it: the ledger's signature gate verifies it against By's key as the log
// registered it before the event is written.
type RequestSignature struct {
	By, Key, Nonce, Sig string
	Time                event.Instant
	Request             []byte

	used atomic.Bool
}

type signatureKey struct{}

// WithRequestSignature returns a context whose request is signed: the
// first event the request leads to whose actor is the signer (or whose
// hold the signer answers) carries the signature.
func WithRequestSignature(ctx context.Context, s *RequestSignature) context.Context {
	return context.WithValue(ctx, signatureKey{}, s)
}

// attachSignature gives ev the request's signature, if ctx carries one
// not yet used and ev is the signer's.
func attachSignature(ctx context.Context, ev *event.Event) *RequestSignature {
	s, _ := ctx.Value(signatureKey{}).(*RequestSignature)
	if s == nil || s.used.Load() || ev.Kind == event.KindActionDenied {
		// A denial records the kernel's refusal of the request, not the
		// request (it carries no payload, which the signature covers):
		// it goes unsigned, as the signature rule allows.
		return nil
	}
	if ev.Actor != s.By && (ev.Hold == nil || ev.Hold.AnsweredBy != s.By) {
		return nil
	}
	ev.Signed = &event.Signed{By: s.By, Key: s.Key, Nonce: s.Nonce, Time: s.Time, Sig: s.Sig, Request: s.Request}
	event.CompactSigned(ev)
	return s
}

// SigningKeyRequest changes an actor's signing key (actor.key).
type SigningKeyRequest struct {
	// Key is a signed-note Ed25519 verifier key; empty revokes the key.
	Key           string `json:"key,omitempty"`
	RequireSigned bool   `json:"require_signed,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// SetSigningKey registers, rotates or revokes actorID's signing key. The
// actor itself may, by a request signed with its current key when it has
// one; so may root or the agent's creator.
func (k *Kernel) SetSigningKey(ctx context.Context, by *Actor, actorID string, req SigningKeyRequest) (*Receipt, error) {
	const stage = "signing_key"
	if req.Key != "" {
		if _, err := event.ParseSigningKey(req.Key); err != nil {
			return nil, formError(stage, "%v", err)
		}
	}
	d, err := k.decide(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindActorKey, Actor: by.ID,
			KeyChange: &event.KeyChange{Actor: actorID, Key: req.Key, RequireSigned: req.RequireSigned, Reason: req.Reason}}, nil
	})
	if err != nil {
		return nil, err
	}
	k.logger.Info("signing key changed", "actor", actorID, "by", by.ID, "revoked", req.Key == "", "require_signed", req.RequireSigned, "index", d.index)
	return receiptOf(d, "", ""), nil
}
