package client

import (
	"context"
	"fmt"
	"time"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/execute"
)

// Intent is an execute intent the kernel allowed: what its result names.
type Intent struct {
	// Index is the log index the result names: the intent's entry, or the
	// approving entry when a human approved a held intent.
	Index    uint64
	Target   string
	Envelope string
	Session  string
	InputOID string
	// HoldID is the hold a human answered, if the intent was held.
	HoldID string
}

// HoldRefusedError is an intent a human rejected, or whose hold timed out
// or failed: the command must not run.
type HoldRefusedError struct{ Hold *api.Hold }

func (e *HoldRefusedError) Error() string {
	h := e.Hold
	msg := fmt.Sprintf("hold %s of %s on %s was %s", h.ID, h.Type, h.Target, h.Status)
	if h.AnsweredBy != "" {
		msg += " by " + h.AnsweredBy
	}
	if h.Reason != "" {
		msg += ": " + h.Reason
	}
	return msg
}

// DecideIntent submits an execute intent (rules version 3) for what is
// about to run on target — input its content id, about what the log says
// of it — and returns once the kernel allowed it. When a hold rule holds it,
// held is called with the hold id and DecideIntent waits for a human's
// answer, polling every poll, until ctx ends: a rejection is a
// *HoldRefusedError, a denial the kernel's *Error. Nothing may run unless it
// returns no error.
func (c *Client) DecideIntent(ctx context.Context, target, envelope, session, input string, about map[string]any,
	held func(holdID string), poll time.Duration) (*Intent, error) {
	payload, err := execute.Intent(input, about)
	if err != nil {
		return nil, err
	}
	rc, err := c.Submit(ctx, api.ActionRequest{Type: "execute", Target: target, Payload: payload, Envelope: envelope, Session: session})
	if err != nil {
		return nil, err
	}
	in := &Intent{Index: rc.Index, Target: target, Envelope: rc.Envelope, Session: session, InputOID: input}
	if rc.Status != "held" {
		return in, nil
	}
	in.HoldID = rc.HoldID
	if held != nil {
		held(rc.HoldID)
	}
	h, err := c.WaitHold(ctx, rc.HoldID, poll)
	if err != nil {
		return nil, err
	}
	if h.Status != "approved" {
		return nil, &HoldRefusedError{Hold: h}
	}
	in.Index = h.AnsweredAt
	return in, nil
}

// RecordResult commits what ran under in: r.Intent and r.InputOID are
// filled from in. A result that could not be committed leaves the intent
// open in the log; the caller MUST report the run as failed.
func (c *Client) RecordResult(ctx context.Context, in *Intent, r execute.Result) (*api.Receipt, error) {
	r.Intent, r.InputOID = in.Index, in.InputOID
	payload, err := r.Payload()
	if err != nil {
		return nil, err
	}
	return c.Submit(ctx, api.ActionRequest{Type: "execute", Target: in.Target, Payload: payload, Envelope: in.Envelope, Session: in.Session})
}
