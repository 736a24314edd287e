package kernel

import (
	"bytes"
	"context"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// recordDenial appends an action.denied event for a refused action whose
// type and target are well formed, at a gate whose refusals are recorded
// (ledger.Recorded), unless the kernel runs with StrictDenials.
func (k *Kernel) recordDenial(ctx context.Context, actor *Actor, req ActionRequest, d *Denial) {
	switch {
	case k.cfg.StrictDenials, !ledger.Recorded(d.Gate), d.Class == ErrUnauthenticated:
		return
	}
	action := event.Action{Type: req.Type, Target: req.Target}
	if action.Validate() != nil {
		return // nothing well formed to record
	}
	if event.ValidEnvelopeID(req.Envelope) {
		action.Envelope = req.Envelope
	}
	reason := d.Reason
	if len(reason) > 2048 {
		reason = reason[:2048]
	}
	reason = string(bytes.ToValidUTF8([]byte(reason), nil))
	rec, err := k.decide(ctx, "denial", func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		ev := &event.Event{Kind: event.KindActionDenied, Actor: actor.ID, Action: &action,
			Decision: &event.Decision{Outcome: event.OutcomeDenied}, Denial: &event.Denial{Stage: d.Stage + "/" + d.Gate, Reason: reason}}
		if delta.ValidIdentifier(req.Session) {
			ev.Session = req.Session
		}
		return ev, nil
	})
	if err != nil {
		k.logger.Warn("record denial", "err", err)
		return
	}
	d.Recorded, d.Index = true, rec.index
}
