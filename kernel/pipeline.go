package kernel

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/annal-dev/annal/kernel/event"
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
}

// Receipt is the kernel's answer to an action that was committed. It is
// given only once the event is durably in the log.
type Receipt struct {
	EventID  string           `json:"event_id"`
	Index    uint64           `json:"index"`
	LeafHash string           `json:"leaf_hash"` // lower-case hex of SHA-256(0x00 || entry)
	Time     string           `json:"time"`
	Actor    string           `json:"actor"`
	Type     event.ActionType `json:"type"`
	Target   string           `json:"target"`
	Cost     uint64           `json:"cost"`
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

// submission carries one action through the pipeline.
type submission struct {
	k      *Kernel
	actor  *Actor
	req    ActionRequest
	now    time.Time
	action event.Action

	outputBytes uint64
	cost        uint64
	reservation reservation
	decision    event.Decision
	ev          event.Event
	entry       []byte
	index       uint64
	receipt     *Receipt
}

type stage struct {
	name string
	run  func(*submission, context.Context) error
}

// pipeline is the one path every action takes. Each stage either passes or
// denies; a denial after reserve releases the reservation.
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
// only once the event is durably sequenced; on any denial nothing is
// appended and the error is a *Denial naming the stage.
func (k *Kernel) Submit(ctx context.Context, actor *Actor, req ActionRequest) (*Receipt, error) {
	s := &submission{k: k, actor: actor, req: req, now: k.cfg.Now()}
	for _, st := range pipeline {
		if err := st.run(s, ctx); err != nil {
			if s.reservation != nil {
				s.reservation.release()
			}
			var d *Denial
			if !errors.As(err, &d) {
				err = &Denial{Stage: st.name, Class: ErrUnavailable, Reason: err.Error()}
			}
			return nil, err
		}
	}
	return s.receipt, nil
}

// validate: the actor exists and may act, and the action is well formed
// (type, target, payload form). [INV-4]
func (s *submission) validate(context.Context) error {
	a, ok := s.k.state.actor(s.actor.ID)
	if !ok {
		return deny(StageValidate, ErrUnauthenticated, "actor %s does not exist", s.actor.ID)
	}
	if a.expired(s.now) {
		return deny(StageValidate, ErrForbidden, "actor %s expired at %s", a.ID, a.Expires)
	}
	s.actor = a
	s.action = event.Action{Type: s.req.Type, Target: s.req.Target, PayloadHash: s.req.PayloadHash}
	if s.req.Payload != nil {
		if err := event.CheckJSON(s.req.Payload); err != nil {
			return deny(StageValidate, ErrInvalid, "payload: %v", err)
		}
		canonical, err := jcs.Transform(s.req.Payload)
		if err != nil {
			return deny(StageValidate, ErrInvalid, "payload: %v", err)
		}
		s.action.Payload = canonical
	}
	if err := s.action.Validate(); err != nil {
		return deny(StageValidate, ErrInvalid, "%v", err)
	}
	return nil
}

// quote: the action's energy cost.
func (s *submission) quote(context.Context) error {
	if s.action.Type == event.Execute && s.action.Payload != nil {
		var p struct {
			OutputBytes *uint64 `json:"output_bytes"`
		}
		if json.Unmarshal(s.action.Payload, &p) == nil && p.OutputBytes != nil {
			s.outputBytes = *p.OutputBytes
		}
	}
	s.cost = s.k.costs.Quote(s.action.Type, s.outputBytes)
	return nil
}

// reserve: lock the quoted energy. [INV-5]
func (s *submission) reserve(context.Context) error {
	r, err := s.k.energy.reserve(s.actor, s.cost)
	if err != nil {
		return deny(StageReserve, ErrForbidden, "%v", err)
	}
	s.reservation = r
	return nil
}

// validatePayload: the payload has the shape its action type requires.
func (s *submission) validatePayload(context.Context) error {
	if s.action.Type != event.Execute {
		return nil
	}
	if s.action.Payload == nil {
		return deny(StageValidatePayload, ErrInvalid, "execute needs an inline payload with input_oid, output_oid, artifact_hash and exit_code (§5.6)")
	}
	if err := validateExecutePayload(s.action.Payload); err != nil {
		return deny(StageValidatePayload, ErrInvalid, "execute payload: %v", err)
	}
	return nil
}

// settle: turn the reservation into consumption and record the decision.
func (s *submission) settle(context.Context) error {
	settled := s.reservation.settle()
	s.decision = event.Decision{Outcome: event.OutcomeCommitted, Cost: s.cost, Reserved: s.cost, Settled: settled}
	return nil
}

// append: encode the event and add it to the log; returns once durable.
// [INV-1, INV-3]
func (s *submission) append(ctx context.Context) error {
	id, err := newEventID()
	if err != nil {
		return err
	}
	action := s.action
	s.ev = event.Event{
		V: event.Version, ID: id, Time: event.FormatTime(s.now), Kind: event.KindAction,
		Actor: s.actor.ID, Action: &action, Decision: &s.decision,
	}
	entry, err := event.Encode(&s.ev)
	var tooLarge *event.TooLargeError
	if errors.As(err, &tooLarge) {
		return deny(StageAppend, ErrTooLarge, "%v", err)
	} else if err != nil {
		return deny(StageAppend, ErrInvalid, "%v", err)
	}
	s.entry = entry
	if s.index, err = s.k.log.append(ctx, entry); err != nil {
		if errors.Is(err, tessera.ErrPushback) {
			return deny(StageAppend, ErrUnavailable, "the log is busy, retry: %v", err)
		}
		return deny(StageAppend, ErrUnavailable, "log append failed: %v", err)
	}
	s.reservation = nil // settled and durable: nothing to release
	return nil
}

// makeReceipt: the verifiable receipt.
func (s *submission) makeReceipt(context.Context) error {
	leaf := event.LeafHash(s.entry)
	s.receipt = &Receipt{
		EventID: s.ev.ID, Index: s.index, LeafHash: hex.EncodeToString(leaf[:]),
		Time: s.ev.Time, Actor: s.actor.ID, Type: s.action.Type, Target: s.action.Target,
		Cost: s.cost,
	}
	return nil
}

// validateExecutePayload checks §5.6: input_oid, output_oid and
// artifact_hash are "sha256:<64 hex>", exit_code an integer, output_bytes
// (optional) a non-negative integer.
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
	var code int64
	if json.Unmarshal(raw, &code) != nil {
		return fmt.Errorf("exit_code must be an integer")
	}
	if raw, ok := p["output_bytes"]; ok {
		var n uint64
		if json.Unmarshal(raw, &n) != nil {
			return fmt.Errorf("output_bytes must be a non-negative integer")
		}
	}
	return nil
}
