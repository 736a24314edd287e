package kernel

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
)

// How an action request becomes the event decide checks: its form,
// canonicalised where it enters (actionForm), then, against the ledger the
// decision is taken on, its envelope, hold and cost (actionBuilder).

// actionBuilder is the builder decide runs for an action (or, with
// approval, a held action a human approved) of actor.
func actionBuilder(actor string, req ActionRequest, action event.Action, approval *event.Hold) builder {
	return func(l *ledger.Ledger, now event.Instant) (*event.Event, error) {
		if req.ActionID != "" {
			if err := namedDescriptor(l, req.ActionID, action.Type, action.Target); err != nil {
				return nil, err
			}
		}
		return buildAction(l, actor, req.Session, action, approval, now)
	}
}

// buildAction builds the event an action becomes: under the envelope the
// request names or, for an agent's state-changing action, the oldest live
// one that grants it; held when a hold rule of its chain matches; with the
// cost its exact payload gives.
func buildAction(l *ledger.Ledger, actor, sess string, action event.Action, approval *event.Hold, now event.Instant) (*event.Event, error) {
	ev := &event.Event{Kind: event.KindAction, Actor: actor, Session: sess, Action: &action}
	intent, isResult := l.ResultOf(&action)
	switch {
	case isResult && intent != nil && action.Envelope == "":
		action.Envelope = intent.Envelope // a result completes its intent, under its envelope
	case !isResult && action.Envelope == "" && action.Type != event.Observe:
		if a, ok := l.Actors[actor]; ok && !a.IsHuman() {
			action.Envelope = pickEnvelope(l, a.ID, action.Type, action.Target, now)
		}
	}
	chain, _ := l.Chain(action.Envelope)
	cost := l.ActionCost(action.Type, action.Payload) // the payload gate judges the payload
	switch {
	case isResult:
		// never held: its intent was decided
	case approval != nil:
		if h, ok := l.Holds[approval.ID]; ok {
			cost = h.Reserved
		}
		ev.Hold = approval
	case ledger.MustHold(chain, action.Type, action.Target):
		holdID, err := newHoldID()
		if err != nil {
			return nil, err
		}
		ev.Kind = event.KindHoldRequested
		ev.Hold = &event.Hold{ID: holdID, Envelope: action.Envelope, Reserved: cost, Deadline: ledger.HoldDeadline(chain, now)}
		return ev, nil
	}
	ev.Decision = &event.Decision{Outcome: event.OutcomeCommitted, Cost: cost, Reserved: cost, Settled: cost}
	return ev, nil
}

// pickEnvelope returns the oldest of agent's envelopes that it may act
// under now for t on target, or "" (the envelope gate then refuses).
func pickEnvelope(l *ledger.Ledger, agent string, t event.ActionType, target string, now event.Instant) string {
	for _, id := range l.EnvelopesOf(agent) {
		chain, v := l.Chain(id)
		if v == nil && l.LiveChain(chain, now) == nil && (chain[0].Allows(t, target) || l.OwnTree(agent, target)) {
			return id
		}
	}
	return ""
}

// namedDescriptor checks a descriptor the request names (§5.3): it must be
// registered and apply to the action. Descriptors that apply count whether
// named or not; the name itself is not logged.
func namedDescriptor(l *ledger.Ledger, id string, t event.ActionType, target string) error {
	d, ok := l.Descriptors[id]
	if !ok {
		return denyAt(StageValidate, GateRing, ErrForbidden, "action %s is not registered", id)
	}
	if !ledger.Allows(d.AppliesTo, target, t) {
		return denyAt(StageValidate, GateRing, ErrForbidden, "action %s does not apply to %s on %s", id, t, target)
	}
	return nil
}

// actionForm checks an action request's shape and canonicalises what will
// be logged: the payload in RFC 8785 form, declared paths cleaned.
func actionForm(req ActionRequest) (event.Action, error) {
	a := event.Action{Type: req.Type, Target: req.Target, Payload: req.Payload, PayloadHash: req.PayloadHash, Envelope: req.Envelope}
	if req.ActionID != "" && !delta.ValidIdentifier(req.ActionID) {
		return a, formError(StageValidate, "action_id %q does not match ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$ (at most 256, §5.3)", req.ActionID)
	}
	if r := req.Resources; r != nil {
		res := *r
		var err error
		if res.FilesystemRead, err = cleanResourcePaths(r.FilesystemRead); err == nil {
			res.FilesystemWrite, err = cleanResourcePaths(r.FilesystemWrite)
		}
		if err != nil {
			return a, formError(StageValidate, "resources: %v", err)
		}
		a.Resources = &res
	}
	// The action's form, its payload's JSON included (refused where RFC
	// 8785 would change its meaning), before the payload is canonicalised.
	if err := a.Validate(); err != nil {
		return a, formError(StageValidate, "%v", err)
	}
	if a.Payload != nil {
		canonical, err := event.Canonical(a.Payload)
		if err != nil {
			return a, formError(StageValidate, "payload: %v", err)
		}
		a.Payload = canonical
		if field := controlField(canonical); field != "" {
			return a, formError(StageValidate, "payload carries the reserved control field %q: the kernel keeps its own control state and takes none from callers", field)
		}
	}
	return a, nil
}

// controlField returns a top-level payload member that looks like kernel
// control state ("_hold…", "_annal…", "_kernel…"), as the reference
// implementation read from payloads: such a member is refused outright, so
// no caller can even try to steer the kernel through its payload.
func controlField(payload []byte) string {
	// Every such member name starts with `"_` in the canonical payload
	// (RFC 8785 leaves "_" unescaped): a payload without it has none, and
	// is not parsed again.
	if len(payload) == 0 || payload[0] != '{' || !bytes.Contains(payload, []byte(`"_`)) {
		return ""
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(payload, &members) != nil {
		return ""
	}
	for name := range members {
		for _, prefix := range []string{"_hold", "_annal", "_kernel"} {
			if strings.HasPrefix(name, prefix) {
				return name
			}
		}
	}
	return ""
}
