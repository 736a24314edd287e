package event

import (
	"fmt"
	"strings"
)

// The kinds of event that record a hold (Def. 4.20).
const (
	// KindHoldRequested records an action held for a human's answer (Def. 4.20).
	KindHoldRequested Kind = "hold.requested"
	// KindHoldAnswered records a hold that ended without its action being
	// committed: rejected, timed out, or approved but refused on re-check.
	// An approved hold whose action commits ends with that action's event.
	KindHoldAnswered Kind = "hold.answered"
)

// Hold decisions.
const (
	HoldApprove = "approve"
	HoldReject  = "reject"
	HoldTimeout = "timeout"
)

// Hold is carried by hold.requested, hold.answered, and by the action
// event that commits an approved hold.
type Hold struct {
	ID string `json:"id"`
	// Envelope, Reserved and Deadline are set in hold.requested.
	Envelope string  `json:"envelope,omitempty"`
	Reserved uint64  `json:"reserved,omitempty"`
	Deadline Instant `json:"deadline,omitzero"`
	// Decision and AnsweredBy are set when the hold ends; Settled is what
	// its end charged (hold.answered).
	Decision   string `json:"decision,omitempty"`
	AnsweredBy string `json:"answered_by,omitempty"`
	Settled    uint64 `json:"settled,omitempty"`
	// Reason is why the hold ended as it did, at most 2048 bytes of UTF-8,
	// wherever it ends: a rejection's, a time-out's, an approval's (on the
	// approved action's event; optional, since logs written before approvals
	// carried one have none), or an approval refused on re-check (the
	// approver's reason and the refusal's).
	Reason string `json:"reason,omitempty"`
}

// ValidHoldID reports whether id can name a hold: "hold-" and 1 to 60
// lower-case letters, digits or '-'.
func ValidHoldID(id string) bool {
	rest, ok := strings.CutPrefix(id, "hold-")
	return ok && len(rest) > 0 && len(rest) <= 60 && strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// check checks a hold as the event's kind carries it: a request, an
// answer, or the approval an action commits.
func (h *Hold) check(e *Event) error {
	if !ValidHoldID(h.ID) {
		return fmt.Errorf("hold id %q is not valid", h.ID)
	}
	if err := validateText("hold reason", h.Reason, 2048); err != nil {
		return err
	}
	if h.Reserved > MaxEnergy || h.Settled > MaxEnergy {
		return fmt.Errorf("hold %s: energy above 2^53", h.ID)
	}
	switch e.Kind {
	case KindHoldRequested:
		return h.checkRequest()
	case KindHoldAnswered:
		return h.checkAnswer()
	case KindAction:
		return h.checkApproval()
	}
	return nil
}

// requested reports whether h carries a request's fields.
func (h *Hold) requested() bool { return h.Envelope != "" || !h.Deadline.IsZero() }

// answered reports whether h carries an answer's fields.
func (h *Hold) answered() bool { return h.Decision != "" || h.AnsweredBy != "" || h.Settled != 0 }

func (h *Hold) checkRequest() error {
	if !ValidEnvelopeID(h.Envelope) || h.answered() || h.Reason != "" {
		return fmt.Errorf("hold %s: a request names its envelope and carries no answer", h.ID)
	}
	return validateTime("hold deadline", h.Deadline)
}

func (h *Hold) checkAnswer() error {
	if h.requested() || h.Reserved != 0 {
		return fmt.Errorf("hold %s: an answer carries no request fields", h.ID)
	}
	switch h.Decision {
	case HoldReject, HoldTimeout, HoldApprove:
	default:
		return fmt.Errorf("hold %s: decision %q is not approve, reject or timeout", h.ID, h.Decision)
	}
	if !ValidActorID(h.AnsweredBy) {
		return fmt.Errorf("hold %s: answered_by %q is not an actor id", h.ID, h.AnsweredBy)
	}
	return nil
}

func (h *Hold) checkApproval() error {
	if h.requested() || h.Decision != HoldApprove || !ValidActorID(h.AnsweredBy) || h.Settled != 0 || h.Reserved != 0 {
		return fmt.Errorf("hold %s: an action commits a hold only as its approval, with answered_by", h.ID)
	}
	return nil
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindHoldRequested] = carries(must("hold"), may("session"), must("action"))
	kinds[KindHoldAnswered] = carries(must("hold"))
}
