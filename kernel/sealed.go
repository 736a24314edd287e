package kernel

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/annal-dev/annal/format/bundle"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/sealstore"
)

// sealAction seals the payload of an action that asks for it or must (its
// actor or envelope asks for sealed payloads) before it is decided: the
// payload is stored durably and the action carries its commitment instead.
// The plaintext stays with the kernel for the decision (the policy gate
// reads it through Options.Open). An execute payload, read by the rules,
// is never sealed; asking for it is an error, and so is a payload sent by
// hash (its blob is not erasable).
func (k *Kernel) sealAction(ctx context.Context, actor *Actor, req ActionRequest, action *event.Action) (done func(error), _ error) {
	if !req.asksToSeal() {
		must, err := k.mustSeal(ctx, actor, req, action)
		if !must || err != nil {
			return noop, err
		}
	}
	if err := sealable(action); err != nil {
		return nil, err
	}
	subject, err := k.sealSubject(actor, req)
	if err != nil {
		return nil, err
	}
	salt, err := requestSalt(req)
	if err != nil {
		return nil, err
	}
	sp, fresh, err := k.sealed.Seal(subject, salt, action.Payload)
	if errors.Is(err, ErrErased) {
		return nil, denyAt(StageValidate, ledger.GateSeal, ErrConflict, "subject %s was erased: nothing more is sealed under it", subject)
	} else if err != nil {
		return nil, denyAt(StageValidate, "", ErrUnavailable, "%v", err)
	}
	action.Payload, action.Sealed = nil, sp
	return func(err error) {
		// Refused for sure: nothing names the file. An append whose
		// outcome is unknown may have landed: the file stays.
		var d *Denial
		refused := errors.As(err, &d) && !d.OutcomeUnknown
		k.sealed.Release(sp, fresh, !refused)
	}, nil
}

// asksToSeal reports whether the request asks for its payload to be sealed.
func (req ActionRequest) asksToSeal() bool { return req.Seal || req.Subject != "" || req.Salt != "" }

// mustSeal reports whether an action that did not ask to be sealed must
// be, because its actor or envelope asks for sealed payloads (an execute
// payload, or an action without one, never is). A signed request must seal
// its payload itself: the kernel's own salt would not be what it signed.
func (k *Kernel) mustSeal(ctx context.Context, actor *Actor, req ActionRequest, action *event.Action) (bool, error) {
	if !k.ledger.AnyMustSeal() {
		return false, nil
	}
	k.mu.RLock()
	envelope := req.Envelope
	if envelope == "" && action.Type != event.Observe {
		if a, ok := k.ledger.Actors[actor.ID]; ok && !a.IsHuman() {
			envelope = pickEnvelope(k.ledger, actor.ID, action.Type, action.Target, event.At(k.cfg.Now()))
		}
	}
	must := k.ledger.MustSeal(actor.ID, envelope)
	k.mu.RUnlock()
	if !must || action.Type == event.Execute || (action.Payload == nil && action.PayloadHash == "") {
		return false, nil
	}
	if s, _ := ctx.Value(signatureKey{}).(*RequestSignature); s != nil && s.By == actor.ID {
		return false, formError(StageValidate, "%s or its envelope asks that payloads be sealed: a signed request seals its payload itself (seal, subject and salt; the Go client and annal do)", actor.ID)
	}
	return true, nil
}

// sealable refuses a payload that cannot be sealed.
func sealable(action *event.Action) error {
	switch {
	case action.Type == event.Execute:
		return formError(StageValidate, "an execute payload is read by the rules (its cost, its intent) and cannot be sealed")
	case action.PayloadHash != "":
		return formError(StageValidate, "a sealed payload travels inline, not by payload_hash: a blob is not erasable")
	case action.Payload == nil:
		return formError(StageValidate, "seal: the action has no payload to seal")
	case len(action.Payload) > event.MaxSealedPayload:
		return denyAt(StageValidate, GateForm, ErrTooLarge, "sealed payload is %d bytes, more than %d", len(action.Payload), event.MaxSealedPayload)
	}
	return nil
}

// sealSubject is whose key seals the payload: the one the request names,
// else the actor's own; never an erased subject's.
func (k *Kernel) sealSubject(actor *Actor, req ActionRequest) (string, error) {
	subject := req.Subject
	if subject == "" {
		subject = actor.ID
	}
	if !event.ValidSubject(subject) {
		return "", formError(StageValidate, "subject %q is not 1-128 of [A-Za-z0-9._:-] starting with a letter or digit", subject)
	}
	k.mu.Lock()
	erased, isErased := k.ledger.Erased[subject]
	k.mu.Unlock()
	if isErased {
		return "", denyAt(StageValidate, ledger.GateSeal, ErrConflict, "subject %s was erased at entry %d: nothing more is sealed under it", subject, erased.Index)
	}
	return subject, nil
}

// requestSalt is the salt the request gives (a signed request's: it
// signed the commitment it makes), else a fresh one.
func requestSalt(req ActionRequest) ([]byte, error) {
	if req.Salt == "" {
		return sealstore.NewSalt()
	}
	salt, err := base64.StdEncoding.DecodeString(req.Salt)
	if err != nil || len(salt) != event.SaltSize {
		return nil, formError(StageValidate, "salt is not the standard base64 of %d bytes", event.SaltSize)
	}
	return salt, nil
}

func noop(error) {}

// OpenSealed returns the salt and payload of a sealed payload the kernel
// still holds, or ErrErased.
func (k *Kernel) OpenSealed(sp *event.SealedPayload) (salt, payload []byte, err error) {
	return k.sealed.Open(sp)
}

// EraseRequest asks the kernel to erase a data subject.
type EraseRequest struct {
	Reason string `json:"reason,omitempty"`
}

// EraseSubject erases subject's sealed payloads: a subject.erased event
// (a human's), and once it is durable the subject's key is destroyed and
// its payloads removed. From then on the payloads are unreadable through
// the API, in bundles and in the data folder, and nothing more is sealed
// under the subject; every entry, proof and checkpoint is unchanged.
func (k *Kernel) EraseSubject(ctx context.Context, by *Actor, subject string, req EraseRequest) (*Receipt, error) {
	const stage = "erase"
	if !event.ValidSubject(subject) {
		return nil, formError(stage, "subject %q is not 1-128 of [A-Za-z0-9._:-] starting with a letter or digit", subject)
	}
	d, err := k.decide(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindSubjectErased, Actor: by.ID, Erasure: &event.Erasure{Subject: subject, Reason: req.Reason}}, nil
	})
	if err != nil {
		return nil, err
	}
	if err := k.sealed.Destroy(subject); err != nil {
		// The event is durable: the next start destroys the key
		// (finishErasures). Until then the payloads are still readable.
		k.logger.Error("erasure logged but the key was not destroyed; the next start destroys it", "subject", subject, "err", err)
		return nil, denyAt(stage, "", ErrUnavailable, "subject %s is erased in the log (entry %d) but its key could not be destroyed yet: %v", subject, d.index, err)
	}
	k.logger.Info("subject erased", "subject", subject, "by", by.ID, "index", d.index)
	return receiptOf(d, "", ""), nil
}

// finishErasures destroys the keys of erased subjects a crash left behind
// (between an erasure's event and its destruction), and a key a seal
// created while the erasure was in flight.
func (k *Kernel) finishErasures() error {
	for subject := range k.ledger.Erased {
		if !k.sealed.Holds(subject) {
			continue
		}
		if err := k.sealed.Destroy(subject); err != nil {
			return fmt.Errorf("destroy the key of erased subject %s: %w", subject, err)
		}
		k.logger.Warn("destroyed the key of a subject erased before a crash", "subject", subject)
	}
	return nil
}

// SealedOf returns the sealed payload an entry's action commits to, or nil.
func SealedOf(entry []byte) *event.SealedPayload { return sealstore.SealedOf(entry) }

// openingOf is what a bundle carries for entry: its sealed payload opened
// while the kernel holds it, else nothing (the entry's commitment stands
// alone).
func (k *Kernel) openingOf(entry []byte, res *ExportResult) *bundle.Opening {
	sp := sealstore.SealedOf(entry)
	if sp == nil {
		return nil
	}
	salt, payload, err := k.sealed.Open(sp)
	if err != nil {
		if !errors.Is(err, ErrErased) {
			k.logger.Warn("export: a sealed payload cannot be opened", "commitment", sp.Commitment, "err", err)
		}
		res.Erased++
		return nil
	}
	res.Opened++
	return &bundle.Opening{Payload: payload, Salt: salt}
}

// Erased reports whether subject was erased.
func (k *Kernel) Erased(subject string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.ledger.Erased[subject]
	return ok
}
