package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/internal/sealstore"
)

// Retention of session deltas (Execution Control §14.7: deltas 180 days,
// hashes permanent). With Config.DeltaRetention set (the default), a
// delta's changes are sealed as a sealed payload is (sealed.go): stored
// beside the log under a key of the subject "delta:<delta_id>", the log
// holding only a salted commitment and retain_until. The delta's hash
// covers the commitment, so the chain and every proof verify from the log
// alone. When retain_until passes, the kernel logs subject.erased for the
// subject, naming the session, and once that is durable destroys the key:
// the changes are gone from the API, bundles and the data folder, and
// every entry, hash and proof is unchanged. A crash between the two is
// finished at the next start (finishErasures).

// MinDeltaRetention is the shortest DeltaRetention other than 0.
const MinDeltaRetention = time.Minute

// sealDelta seals d's changes, if deltas are retained, before d is
// decided; within the decision, retainUntil completes d.Sealed. done ends
// the seal's request once the decision is known.
func (k *Kernel) sealDelta(d *delta.Delta) (done func(error), _ error) {
	k.mu.Lock()
	rules := k.ledger.Rules
	k.mu.Unlock()
	if k.cfg.DeltaRetention == 0 || rules < ledger.RulesRetention {
		return noop, nil
	}
	raw, err := json.Marshal(d.Changes)
	if err == nil {
		raw, err = event.Canonical(raw)
	}
	if err != nil {
		return nil, err
	}
	salt, err := sealstore.NewSalt()
	if err != nil {
		return nil, err
	}
	sp, fresh, err := k.sealed.Seal(delta.SubjectOf(d.DeltaID), salt, raw)
	if err != nil {
		return nil, denyAt("delta", "", ErrUnavailable, "seal the delta's changes: %v", err)
	}
	d.Sealed = &delta.Sealed{Subject: sp.Subject, Commitment: sp.Commitment}
	return func(err error) {
		var den *Denial
		refused := errors.As(err, &den) && !den.OutcomeUnknown
		k.sealed.Release(sp, fresh, !refused)
		if refused { // nothing names the subject: its key goes too
			if err := k.sealed.Destroy(sp.Subject); err != nil {
				k.logger.Warn("remove the key of a refused delta", "subject", sp.Subject, "err", err)
			}
		}
	}, nil
}

// retainUntil is when the changes of a delta decided at now are erased.
func (k *Kernel) retainUntil(now event.Instant) string {
	return now.Add(k.cfg.DeltaRetention).String()
}

// openDelta is d with its changes beside their commitment while the
// kernel keeps them; d as logged once they are erased.
func (k *Kernel) openDelta(d delta.Delta) delta.Delta {
	if d.Sealed == nil {
		return d
	}
	raw, ok := k.sealed.OpenPayload(&event.SealedPayload{Subject: d.Sealed.Subject, Commitment: d.Sealed.Commitment})
	if !ok {
		return d
	}
	var changes []delta.Change
	if json.Unmarshal(raw, &changes) == nil {
		d.Changes = changes
	}
	return d
}

// filesOfChain is what a session's files are after its chain (head), read
// from the chain itself, for a session whose files the ledger no longer
// keeps; known is false when a delta's changes are erased, and then the
// next delta's changes cannot be checked against the files.
func (k *Kernel) filesOfChain(ctx context.Context, sessionID string) (files map[string]string, head string, known bool, _ error) {
	deltas, _, err := k.SessionChain(ctx, sessionID)
	if err != nil {
		return nil, "", false, err
	}
	c := delta.NewChain(sessionID)
	for _, d := range deltas {
		if err := c.Append(d); errors.Is(err, delta.ErrErased) {
			return nil, deltas[len(deltas)-1].DeltaHash, false, nil
		} else if err != nil {
			return nil, "", false, err
		}
	}
	return c.Files(), c.Head(), true, nil
}

// checkFilesFit checks, for a session whose files the ledger no longer
// keeps (check), that changes fit the files its chain gives at fit.head:
// the check the fold makes on the files it keeps. A session whose chain
// moved on since fit was read, or whose files the ledger stopped keeping
// (its first sealed delta came in between: then nobody would check the
// fit), is a retryable refusal: AppendDelta reads the files again.
func checkFilesFit(l *ledger.Ledger, sessionID string, fit *chainFiles, check bool, changes []delta.Change) error {
	se, ok := l.Sessions[sessionID]
	switch {
	case !ok || fit == nil:
		return nil // the fold refuses the delta
	case !check && !se.FilesUnknown:
		return nil // the fold checks the changes against the files it keeps
	case !check || se.DeltaHead != fit.head:
		d := denyAt("delta", GateSession, ErrConflict, "session %s's chain moved on while the delta was decided; send it again", sessionID)
		d.Retryable = true
		return d
	case fit.files == nil:
		return nil // a delta's changes were erased: nothing to check against
	}
	if err := delta.ApplyChanges(maps.Clone(fit.files), changes); err != nil {
		return denyAt("delta", GateSession, ErrConflict, "delta: %v", err)
	}
	return nil
}

// expireRetention erases the changes of every delta whose retention has
// ended: subject.erased by the kernel, then the key destroyed.
func (k *Kernel) expireRetention(ctx context.Context) {
	now := event.At(k.cfg.Now())
	k.mu.Lock()
	due, sessions := k.ledger.DueErasures(now)
	k.mu.Unlock()
	for i, r := range due {
		_, err := k.decide(ctx, "retention", func(*ledger.Ledger, event.Instant) (*event.Event, error) {
			return &event.Event{Kind: event.KindSubjectErased, Actor: event.KernelActor, Session: sessions[i],
				Erasure: &event.Erasure{Subject: r.Subject, Reason: fmt.Sprintf("retention: a delta's changes are kept %v (§14.7)", k.cfg.DeltaRetention)}}, nil
		})
		switch {
		case err == nil:
		case errors.Is(err, ErrUnavailable):
			return
		default:
			k.logger.Warn("erase a delta's changes at the end of their retention", "subject", r.Subject, "err", err)
			continue
		}
		if err := k.sealed.Destroy(r.Subject); err != nil {
			k.logger.Error("a delta's erasure is logged but its key was not destroyed; the next start destroys it", "subject", r.Subject, "err", err)
		}
	}
}

// rememberFiles keeps the files a session's chain gives after d, which
// the kernel just logged after fit, so that the session's next delta is
// checked against them without reading the chain again; only once the
// ledger no longer keeps them (d is sealed, or checked was set).
func (k *Kernel) rememberFiles(sessionID string, fit *chainFiles, checked bool, d *delta.Delta) {
	if fit == nil || (d.Sealed == nil && !checked) {
		return
	}
	if d.ParentHash != fit.head {
		k.chainFiles.Delete(sessionID) // another delta came between: read the chain next time
		return
	}
	next := &chainFiles{head: d.DeltaHash}
	if fit.files != nil {
		next.files = maps.Clone(fit.files)
		if delta.ApplyChanges(next.files, d.Changes) != nil {
			k.chainFiles.Delete(sessionID)
			return
		}
	}
	k.chainFiles.Store(sessionID, next)
}
