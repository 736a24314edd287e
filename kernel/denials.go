package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// recordedGates are the gates whose denials go into the log as
// action.denied events: refusals of well-formed actions, which auditors
// should see. Malformed input and rate-limited floods are not recorded.
var recordedGates = map[string]bool{
	GateActor: true, GateBoundary: true, GateEnvelope: true, GateHold: true, GateEnergy: true,
	GateQuarantine: true, GateSession: true, GateRing: true, GateResources: true, GatePolicy: true,
}

// recordDenial appends an action.denied event for a refused action whose
// type and target are well formed, unless the kernel runs with
// StrictDenials. The caller does not hold k.mu.
func (k *Kernel) recordDenial(ctx context.Context, s *submission, d *Denial) {
	switch {
	case k.cfg.StrictDenials, s.resume != nil:
		return // a refused approval is recorded by its hold.answered event
	case !recordedGates[d.Gate]:
		return // malformed input is refused and changes nothing
	case d.Class == ErrUnauthenticated:
		return // no actor to record it against
	}
	action := event.Action{Type: s.req.Type, Target: s.req.Target}
	if action.Validate() != nil {
		return // nothing well formed to record
	}
	if event.ValidEnvelopeID(s.req.Envelope) {
		action.Envelope = s.req.Envelope
	}
	id, err := newEventID()
	if err != nil {
		return
	}
	gate := d.Gate
	if gate == "" {
		gate = d.Stage
	}
	reason := d.Reason
	if len(reason) > 2048 {
		reason = reason[:2048]
	}
	reason = string(bytes.ToValidUTF8([]byte(reason), nil))
	ev := &event.Event{V: event.Version, ID: id, Time: event.FormatTime(s.now), Kind: event.KindActionDenied,
		Actor: s.actor.ID, Action: &action, Decision: &event.Decision{Outcome: event.OutcomeDenied},
		Denial: &event.Denial{Stage: d.Stage + "/" + gate, Reason: reason}}
	if delta.ValidIdentifier(s.req.Session) {
		ev.Session = s.req.Session
	}
	index, err := k.appendEvent(ctx, ev)
	if err != nil {
		k.logger.Warn("record denial", "err", err)
		return
	}
	d.Recorded, d.Index = true, index
}

// actorExpired reports whether an agent's expiry has passed at now.
func actorExpired(a *Actor, now time.Time) bool { return expiredAt(a.Expires, now) }

func envelopeExpired(v *ledger.Envelope, now time.Time) bool { return expiredAt(v.Expires, now) }

func expiredAt(expires string, now time.Time) bool {
	if expires == "" {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, expires)
	return err != nil || !now.Before(t)
}

// validateExecutePayload checks §5.6: input_oid, output_oid and
// artifact_hash are "sha256:<64 hex>", exit_code an integer, output_bytes
// (optional) a non-negative integer of at most MaxOutputBytes.
func validateExecutePayload(payload json.RawMessage) error {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("must be a JSON object")
	}
	for _, f := range []string{"input_oid", "output_oid", "artifact_hash"} {
		raw, ok := p[f]
		if !ok {
			return fmt.Errorf("%s is missing", f)
		}
		var oid string
		if json.Unmarshal(raw, &oid) != nil || !event.ValidOID(oid) {
			return fmt.Errorf("%s must be \"sha256:<64 lower-case hex>\"", f)
		}
	}
	raw, ok := p["exit_code"]
	if !ok {
		return fmt.Errorf("exit_code is missing")
	}
	var code int32
	if json.Unmarshal(raw, &code) != nil {
		return fmt.Errorf("exit_code must be an integer of 32 bits")
	}
	if raw, ok := p["output_bytes"]; ok {
		var n uint64
		if json.Unmarshal(raw, &n) != nil || n > MaxOutputBytes {
			return fmt.Errorf("output_bytes must be an integer from 0 to 2^40")
		}
	}
	return nil
}
