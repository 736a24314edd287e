package kernel

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/capability"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/tessera"
)

// ActionRequest is what an actor asks the kernel to record.
type ActionRequest struct {
	Type   event.ActionType `json:"type"`
	Target string           `json:"target"`
	// Payload is any JSON value; it is stored in canonical form.
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadHash is "sha256:<hex>" for a payload kept outside the log.
	PayloadHash string `json:"payload_hash,omitempty"`
	// Envelope names the envelope an agent acts under; empty picks the
	// oldest live envelope that grants the action.
	Envelope string `json:"envelope,omitempty"`
	// Session is the session the action runs in (Execution Control §10).
	Session string `json:"session,omitempty"`
	// ActionID names a registered action descriptor (§5); descriptors
	// that apply to the action's target count whether named or not.
	ActionID string `json:"action_id,omitempty"`
	// Resources declares what the action uses, checked against the ring's
	// constraints (§7) and recorded in the event.
	Resources *event.Resources `json:"resources,omitempty"`
}

// Receipt statuses.
const (
	StatusCommitted = "committed"
	StatusHeld      = "held"
)

// Receipt is the kernel's answer to an action that was committed or held.
// It is given only once its event is durably in the log and folded into
// the ledger.
type Receipt struct {
	// Status is "committed", or "held" when a hold rule matched: the event
	// is then a hold.requested and HoldID names the hold.
	Status   string           `json:"status"`
	HoldID   string           `json:"hold_id,omitempty"`
	EventID  string           `json:"event_id"`
	Index    uint64           `json:"index"`
	LeafHash string           `json:"leaf_hash"` // lower-case hex of SHA-256(0x00 || entry)
	Time     string           `json:"time"`
	Actor    string           `json:"actor"`
	Type     event.ActionType `json:"type"`
	Target   string           `json:"target"`
	Envelope string           `json:"envelope,omitempty"`
	// Cost is what the action settled, or what the hold reserved.
	Cost uint64 `json:"cost"`
	// Checkpoint and Proof are set once a published checkpoint covers the
	// event: the signed checkpoint note and the c2sp.org/tlog-proof text.
	Checkpoint string `json:"checkpoint,omitempty"`
	Proof      string `json:"proof,omitempty"`
}

// The pipeline stages of the paper, §5.2, in order.
const (
	StageValidate        = "validate"
	StageQuote           = "quote"
	StageReserve         = "reserve"
	StageValidatePayload = "validate_payload"
	StageSettle          = "settle"
	StageAppend          = "append"
	StageReceipt         = "receipt"
)

// MaxOutputBytes bounds an execute payload's output_bytes, so that a cost
// always fits the ledger's integers.
const MaxOutputBytes = 1 << 40

// submission carries one action through the pipeline.
type submission struct {
	k      *Kernel
	actor  *Actor // the ledger's record; read only under k.mu
	req    ActionRequest
	now    time.Time
	action event.Action
	// resume is the approved hold this submission commits, if any: kernel
	// state, never anything the caller sent.
	resume *ledger.Hold
	// answeredBy is the human who approved resume.
	answeredBy string

	chain []*ledger.Envelope // the envelope acted under, then its ancestors
	names []string           // what policies match the action by: type, target, descriptors
	// policySignal names a policy whose violation sends SIGPOLICY.
	policySignal string
	held         bool
	outputBytes  uint64
	cost         uint64
	reservation  *reservation
	decision     event.Decision
	ev           event.Event
	entry        []byte
	index        uint64
	receipt      *Receipt
}

type stage struct {
	name string
	run  func(*submission, context.Context) error
}

// pipeline is the one path every action takes. The stages up to settle
// decide, under the kernel's lock, against the durable ledger less what is
// in flight; append and receipt run unlocked. A denial after reserve
// releases the reservation.
var pipeline = []stage{
	{StageValidate, (*submission).validate},
	{StageQuote, (*submission).quote},
	{StageReserve, (*submission).reserve},
	{StageValidatePayload, (*submission).validatePayload},
	{StageSettle, (*submission).settle},
	{StageAppend, (*submission).append},
	{StageReceipt, (*submission).makeReceipt},
}

// Submit runs an action by actor through the pipeline. It returns a receipt
// only once the event is durably sequenced. A denial is a *Denial naming
// the stage and gate; unless the kernel runs with StrictDenials, a denial
// of a well-formed action is itself recorded as a zero-cost action.denied
// event. A mutate of ledger/hold/<id> is a human's answer to a hold.
func (k *Kernel) Submit(ctx context.Context, actor *Actor, req ActionRequest) (*Receipt, error) {
	if id, ok := strings.CutPrefix(req.Target, "ledger/hold/"); ok && req.Type == event.Mutate {
		return k.answerHoldAction(ctx, actor, id, req)
	}
	return k.run(ctx, &submission{k: k, actor: actor, req: req, now: k.cfg.Now()})
}

func (k *Kernel) run(ctx context.Context, s *submission) (*Receipt, error) {
	// The request's form depends on nothing the kernel holds: checking and
	// canonicalising it before taking the lock keeps the locked part of
	// the pipeline short. Malformed requests are refused and not recorded.
	if err := s.form(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	locked := true
	unlock := func() {
		if locked {
			k.mu.Unlock()
			locked = false
		}
	}
	defer func() {
		unlock()
		if s.reservation != nil {
			k.mu.Lock()
			k.flight.release(*s.reservation)
			k.mu.Unlock()
		}
	}()
	if k.failed != nil {
		return nil, denyAt(StageValidate, GateActor, ErrUnavailable, "the kernel has stopped taking work: %v", k.failed)
	}
	for _, st := range pipeline {
		if st.name == StageAppend {
			unlock()
		}
		if err := st.run(s, ctx); err != nil {
			var d *Denial
			if !errors.As(err, &d) {
				d = &Denial{Stage: st.name, Class: ErrUnavailable, Reason: err.Error()}
			}
			if st.name != StageAppend {
				unlock()
				k.recordDenial(ctx, s, d)
				if s.policySignal != "" {
					k.signalPolicyViolation(ctx, s.actor.ID, s.policySignal, d.Reason)
				}
			}
			return nil, d
		}
	}
	return s.receipt, nil
}

// validate: the actor exists and is active, the action is well formed, it
// lies within the actor's boundary and, for an agent's state-changing
// action, within a live envelope; then the hold rules. [INV-4]
func (s *submission) validate(context.Context) error {
	k := s.k
	a, ok := k.ledger.Actors[s.actor.ID]
	if !ok {
		return denyAt(StageValidate, GateActor, ErrUnauthenticated, "actor %s does not exist", s.actor.ID)
	}
	s.actor = a
	if !a.Active() {
		return denyAt(StageValidate, GateActor, ErrForbidden, "actor %s is %s", a.ID, a.Status)
	}
	if actorExpired(a, s.now) {
		return denyAt(StageValidate, GateActor, ErrForbidden, "actor %s expired at %s", a.ID, a.Expires)
	}
	if a.Stopped {
		return denyAt(StageValidate, GateActor, ErrForbidden, "agent %s is stopped by SIGSTOP; SIGCONT resumes it", a.ID)
	}
	// form ran before the lock (run); its gate is second in this order.
	if err := s.rateLimit(); err != nil {
		return err
	}
	t, target := s.action.Type, s.action.Target
	if t != event.Observe {
		if capability.IsPrivileged(target) && a.ID != RootID {
			return denyAt(StageValidate, GateBoundary, ErrForbidden, "%s is a privileged target: only root writes system/ and ledger/ (Def. 4.12)", target)
		}
		if !allows(a.Grants, target, t) {
			return denyAt(StageValidate, GateBoundary, ErrForbidden, "%s on %s is outside %s's writable targets (Axiom 4.3: default deny)", t, target, a.ID)
		}
		if !a.IsHuman() {
			if err := s.pickEnvelope(); err != nil {
				return err
			}
		}
	}
	if err := s.controlGates(); err != nil {
		return err
	}
	if s.resume == nil && len(s.chain) > 0 {
		for _, v := range s.chain {
			if allows(v.HoldOn, target, t) {
				s.held = true
			}
		}
		if s.held && k.pendingHolds(s.chain[0].ID) >= k.cfg.MaxPendingHolds {
			return denyAt(StageValidate, GateHold, ErrForbidden, "envelope %s already has %d pending holds, the most allowed", s.chain[0].ID, k.cfg.MaxPendingHolds)
		}
	}
	return nil
}

// form checks the action's shape and canonicalises its payload.
func (s *submission) form() error {
	s.action = event.Action{Type: s.req.Type, Target: s.req.Target, PayloadHash: s.req.PayloadHash, Resources: s.req.Resources}
	if s.req.Session != "" && !delta.ValidIdentifier(s.req.Session) {
		return denyAt(StageValidate, GateForm, ErrInvalid, "session %q does not match ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$ (at most 256, §17.1)", s.req.Session)
	}
	if s.req.ActionID != "" && !delta.ValidIdentifier(s.req.ActionID) {
		return denyAt(StageValidate, GateForm, ErrInvalid, "action_id %q does not match ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$ (at most 256, §5.3)", s.req.ActionID)
	}
	if s.req.Payload != nil {
		if err := event.CheckJSON(s.req.Payload); err != nil {
			return denyAt(StageValidate, GateForm, ErrInvalid, "payload: %v", err)
		}
		canonical, err := jcs.Transform(s.req.Payload)
		if err != nil {
			return denyAt(StageValidate, GateForm, ErrInvalid, "payload: %v", err)
		}
		s.action.Payload = canonical
		if field := controlField(canonical); field != "" {
			return denyAt(StageValidate, GateForm, ErrInvalid, "payload carries the reserved control field %q: the kernel keeps its own control state and takes none from callers", field)
		}
	}
	if err := s.action.Validate(); err != nil {
		return denyAt(StageValidate, GateForm, ErrInvalid, "%v", err)
	}
	return nil
}

// controlField returns a top-level payload member that looks like kernel
// control state ("_hold…", "_annal…", "_kernel…"), as the reference
// implementation read from payloads: such a member is refused outright, so
// no caller can even try to steer the kernel through its payload.
func controlField(payload []byte) string {
	if len(payload) == 0 || payload[0] != '{' {
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

// pickEnvelope finds the live envelope an agent acts under: the one the
// request names, or the oldest that grants the action.
func (s *submission) pickEnvelope() error {
	k, a := s.k, s.actor
	t, target := s.action.Type, s.action.Target
	try := func(id string) error {
		chain, err := k.ledger.Chain(id)
		if err != nil {
			return err
		}
		if chain[0].Holder != a.ID {
			return fmt.Errorf("envelope %s is not %s's", id, a.ID)
		}
		for i, v := range chain {
			if v.Revoked {
				return fmt.Errorf("envelope %s is revoked", v.ID)
			}
			if h := k.ledger.Actors[v.Holder]; i > 0 && (h == nil || !h.Active()) {
				return fmt.Errorf("envelope %s was delegated by %s, who is no longer active", chain[0].ID, v.Holder)
			}
			if envelopeExpired(v, s.now) {
				return fmt.Errorf("envelope %s expired at %s", v.ID, v.Expires)
			}
		}
		if !allows(chain[0].Grants, target, t) {
			return fmt.Errorf("envelope %s does not grant %s on %s", id, t, target)
		}
		s.chain = chain
		return nil
	}
	if s.req.Envelope != "" {
		if err := try(s.req.Envelope); err != nil {
			return denyAt(StageValidate, GateEnvelope, ErrForbidden, "%v", err)
		}
		return nil
	}
	for _, id := range k.ledger.EnvelopesOf(a.ID) {
		if try(id) == nil {
			return nil
		}
	}
	return denyAt(StageValidate, GateEnvelope, ErrForbidden, "agent %s holds no live envelope that grants %s on %s", a.ID, t, target)
}

// quote: the action's energy cost (Def. 4.17). An approved hold costs what
// was reserved when it was held.
func (s *submission) quote(context.Context) error {
	if s.resume != nil {
		s.cost = s.resume.Reserved
		return nil
	}
	if s.action.Type == event.Execute && s.action.Payload != nil {
		var p struct {
			OutputBytes *uint64 `json:"output_bytes"`
		}
		if json.Unmarshal(s.action.Payload, &p) == nil && p.OutputBytes != nil {
			s.outputBytes = min(*p.OutputBytes, MaxOutputBytes)
		}
	}
	s.cost = s.k.ledger.Energy.Costs.Quote(s.action.Type, s.outputBytes)
	return nil
}

// reserve: lock the quoted energy on the actor and every envelope of the
// chain: consumed + reserved never exceeds a budget, and no balance goes
// below zero, whatever else is in flight. [INV-5]
func (s *submission) reserve(context.Context) error {
	if s.resume != nil || s.cost == 0 {
		return nil // an approved hold's energy is reserved in the ledger already
	}
	k, a := s.k, s.actor
	if have := a.Available() - min(a.Available(), k.flight.actor[a.ID]); have < s.cost {
		return denyAt(StageReserve, GateEnergy, ErrInsufficientEnergy, "%s costs %d, actor %s has %d available", s.action.Type, s.cost, a.ID, have)
	}
	r := reservation{actor: a.ID, amount: s.cost}
	for _, v := range s.chain {
		if have := v.Remaining() - min(v.Remaining(), k.flight.envelope[v.ID]); have < s.cost {
			return denyAt(StageReserve, GateEnergy, ErrInsufficientEnergy, "%s costs %d, envelope %s has %d of its budget %d left", s.action.Type, s.cost, v.ID, have, v.Budget)
		}
		r.envelopes = append(r.envelopes, v.ID)
	}
	k.flight.reserve(r)
	s.reservation = &r
	return nil
}

// validatePayload: the payload has the shape its action type requires.
func (s *submission) validatePayload(context.Context) error {
	if s.action.Type != event.Execute {
		return nil
	}
	if s.action.Payload == nil {
		return denyAt(StageValidatePayload, GatePayload, ErrInvalid, "execute needs an inline payload with input_oid, output_oid, artifact_hash and exit_code (§5.6)")
	}
	if err := validateExecutePayload(s.action.Payload); err != nil {
		return denyAt(StageValidatePayload, GatePayload, ErrInvalid, "execute payload: %v", err)
	}
	return nil
}

// settle: decide what the event records. A committed action settles its
// cost; a held one keeps it reserved until a human answers.
func (s *submission) settle(context.Context) error {
	if len(s.chain) > 0 {
		s.action.Envelope = s.chain[0].ID
	}
	s.decision = event.Decision{Outcome: event.OutcomeCommitted, Cost: s.cost, Reserved: s.cost, Settled: s.cost}
	return nil
}

// append: encode the event and add it to the log; returns once durable and
// folded. [INV-1, INV-2, INV-3]
func (s *submission) append(ctx context.Context) error {
	id, err := newEventID()
	if err != nil {
		return err
	}
	action := s.action
	s.ev = event.Event{V: event.Version, ID: id, Time: event.FormatTime(s.now), Actor: s.actor.ID, Session: s.req.Session, Action: &action}
	switch {
	case s.held:
		holdID, err := newHoldID()
		if err != nil {
			return err
		}
		s.ev.Kind = event.KindHoldRequested
		s.ev.Hold = &event.Hold{ID: holdID, Envelope: action.Envelope, Reserved: s.cost, Deadline: s.holdDeadline()}
	default:
		s.ev.Kind = event.KindAction
		s.ev.Decision = &s.decision
		if s.resume != nil {
			s.ev.Hold = &event.Hold{ID: s.resume.ID, Decision: event.HoldApprove, AnsweredBy: s.answeredBy}
		}
	}
	entry, err := event.Encode(&s.ev)
	var tooLarge *event.TooLargeError
	if errors.As(err, &tooLarge) {
		return denyAt(StageAppend, GateForm, ErrTooLarge, "%v", err)
	} else if err != nil {
		return denyAt(StageAppend, GateForm, ErrInvalid, "%v", err)
	}
	s.entry = entry
	if s.index, err = s.k.log.append(ctx, entry, &s.ev); err != nil {
		if errors.Is(err, tessera.ErrPushback) {
			return denyAt(StageAppend, "", ErrUnavailable, "the log is busy, retry: %v", err)
		}
		return denyAt(StageAppend, "", ErrUnavailable, "log append failed: %v", err)
	}
	return nil
}

// holdDeadline is when an unanswered hold times out, if its envelope (or
// an ancestor) sets a timeout: the shortest applies.
func (s *submission) holdDeadline() string {
	var secs uint64
	for _, v := range s.chain {
		if v.HoldTimeoutSecs > 0 && (secs == 0 || v.HoldTimeoutSecs < secs) {
			secs = v.HoldTimeoutSecs
		}
	}
	if secs == 0 {
		return ""
	}
	return event.FormatTime(s.now.Add(time.Duration(secs) * time.Second))
}

// makeReceipt: the verifiable receipt.
func (s *submission) makeReceipt(context.Context) error {
	leaf := event.LeafHash(s.entry)
	s.receipt = &Receipt{
		Status: StatusCommitted, EventID: s.ev.ID, Index: s.index, LeafHash: hex.EncodeToString(leaf[:]),
		Time: s.ev.Time, Actor: s.actor.ID, Type: s.action.Type, Target: s.action.Target,
		Envelope: s.action.Envelope, Cost: s.cost,
	}
	if s.held {
		s.receipt.Status, s.receipt.HoldID = StatusHeld, s.ev.Hold.ID
	}
	return nil
}
