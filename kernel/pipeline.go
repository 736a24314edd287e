package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
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
	// Seal asks that the payload be kept sealed beside the log, under
	// Subject (the actor's id when empty) (sealed.go). Naming a subject or
	// a salt asks it too; an actor or envelope that asks for sealed
	// payloads has every payload sealed.
	Seal    bool   `json:"seal,omitempty"`
	Subject string `json:"subject,omitempty"`
	// Salt is the commitment's salt, standard base64 of 32 bytes: a
	// signed request that seals its payload chooses it, so that it can sign
	// the commitment; otherwise the kernel draws one.
	Salt string `json:"salt,omitempty"`
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
	// Reason is the reason logged with the answer to a hold, for the
	// receipt of an approval or a rejection.
	Reason string `json:"reason,omitempty"`
	// Checkpoint and Proof are set once a published checkpoint covers the
	// event: the signed checkpoint note and the c2sp.org/tlog-proof text.
	Checkpoint string `json:"checkpoint,omitempty"`
	Proof      string `json:"proof,omitempty"`
	// TraceID is the trace id the event records (event.Event.TraceID):
	// the request's trace, if it had one.
	TraceID string `json:"trace_id,omitempty"`
}

// The pipeline stages of the paper, §5.2, in order. validate, reserve and
// validate_payload are the stages of the ledger's gates (Gates gives each
// gate's); quote and settle are the figures the decision records.
const (
	StageValidate        = ledger.StageValidate
	StageQuote           = "quote"
	StageReserve         = ledger.StageReserve
	StageValidatePayload = ledger.StageValidatePayload
	StageSettle          = "settle"
	StageAppend          = "append"
	StageReceipt         = "receipt"
)

// MaxOutputBytes bounds an execute payload's output_bytes, so that a cost
// always fits the ledger's integers.
const MaxOutputBytes = ledger.MaxOutputBytes

// Submit runs an action by actor through the pipeline and returns a
// receipt only once its event is durably sequenced and folded. Its form is
// checked and canonicalised first; then the kernel builds the event it
// would log — picking the envelope, computing the cost from the exact
// payload, holding it if a hold rule matches — and decides it by the
// action rule of the ledger, whose gates run in ActionGateOrder. A denial
// is a *Denial naming the stage and gate; unless the kernel runs with
// StrictDenials, a denial of a well-formed action is itself recorded as a
// zero-cost action.denied event. A mutate of ledger/hold/<id> is a human's
// answer to a hold. Of actor, only its ID is read (Identify gives no more):
// the decision reads the actor's state from the ledger.
func (k *Kernel) Submit(ctx context.Context, actor *Actor, req ActionRequest) (*Receipt, error) {
	if id, ok := strings.CutPrefix(req.Target, "ledger/hold/"); ok && req.Type == event.Mutate {
		return k.answerHoldAction(ctx, actor, id, req)
	}
	action, err := actionForm(req)
	if err != nil {
		return nil, err
	}
	sealed, err := k.sealAction(ctx, actor, req, &action)
	if err != nil {
		return nil, err
	}
	rc, err := k.act(ctx, actor, req, action, nil)
	sealed(err)
	return rc, err
}

// act decides an action (or, with approval, a held action a human
// approved) and records a denial.
func (k *Kernel) act(ctx context.Context, actor *Actor, req ActionRequest, action event.Action, approval *event.Hold) (*Receipt, error) {
	d, err := k.decide(ctx, StageValidate, actionBuilder(actor.ID, req, action, approval))
	if err != nil {
		var den *Denial
		if errors.As(err, &den) && approval == nil && den.Stage != StageAppend && !den.Retryable {
			k.recordDenial(ctx, actor, req, den)
			if den.Policy != "" {
				den.Signal = k.signalPolicyViolation(ctx, actor.ID, den.Policy, den.Reason)
			}
		}
		return nil, err
	}
	rc := receiptOf(d, action.Type, action.Target)
	rc.Envelope = d.ev.Action.Envelope
	if d.ev.Kind == event.KindHoldRequested {
		rc.Status, rc.HoldID, rc.Cost = StatusHeld, d.ev.Hold.ID, d.ev.Hold.Reserved
	} else {
		rc.Cost = d.ev.Decision.Settled
	}
	return rc, nil
}
