package event

import (
	"fmt"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/internal/killswitch"
)

// KindAgentKilled records the kill switch (Execution Control §12): the
// agent is frozen, its envelopes revoked, its in-flight saga steps handed
// off or marked for compensation.
const KindAgentKilled Kind = "agent.killed"

// Handoff is one in-flight saga step at a kill (§12.3).
type Handoff struct {
	Saga string `json:"saga"`
	Step string `json:"step"`
	From string `json:"from"`
	To   string `json:"to,omitempty"`
	// Status is "handed_off" or "compensation".
	Status string `json:"status"`
}

// Handoff statuses.
const (
	HandoffDone         = "handed_off"
	HandoffCompensation = "compensation"
)

// Kill is carried by agent.killed (§12.4).
type Kill struct {
	KillID                string    `json:"kill_id"`
	Agent                 string    `json:"agent"`
	Reason                string    `json:"reason"`
	Handoffs              []Handoff `json:"handoffs,omitempty"`
	HandoffSuccessCount   uint64    `json:"handoff_success_count"`
	CompensationTriggered bool      `json:"compensation_triggered"`
	// Terminated says whether the agent's runtime confirmed termination
	// through its callback; the kernel freezes the agent either way.
	Terminated bool   `json:"terminated"`
	Details    string `json:"details,omitempty"`
	// Revoked lists the envelopes the kill revoked.
	Revoked []string `json:"revoked,omitempty"`
}

func (k *Kill) check(*Event) error {
	if !validUUID(k.KillID) {
		return fmt.Errorf("kill_id %q is not a lower-case UUID", k.KillID)
	}
	if err := validateAgentRef("killed agent", k.Agent); err != nil {
		return err
	}
	if err := validateKillReason(k.Reason); err != nil {
		return err
	}
	handedOff, err := k.checkHandoffs()
	if err != nil {
		return err
	}
	if handedOff != k.HandoffSuccessCount {
		return fmt.Errorf("kill %s: handoff_success_count %d, but %d handoffs succeeded", k.KillID, k.HandoffSuccessCount, handedOff)
	}
	if k.CompensationTriggered != (uint64(len(k.Handoffs)) > handedOff) {
		return fmt.Errorf("kill %s: compensation_triggered must say whether any step is marked for compensation", k.KillID)
	}
	for _, id := range k.Revoked {
		if !ValidEnvelopeID(id) {
			return fmt.Errorf("kill %s: revoked envelope %q is not an envelope id", k.KillID, id)
		}
	}
	return validateText("kill details", k.Details, 2048)
}

// checkHandoffs checks each handoff, a step of the killed agent handed to
// a substitute or marked for compensation, and counts those handed off.
func (k *Kill) checkHandoffs() (handedOff uint64, err error) {
	for _, h := range k.Handoffs {
		switch {
		case !delta.ValidIdentifier(h.Saga) || !delta.ValidIdentifier(h.Step):
			return 0, fmt.Errorf("kill %s: handoff of step %q of saga %q: not valid identifiers", k.KillID, h.Step, h.Saga)
		case h.From != k.Agent:
			return 0, fmt.Errorf("kill %s: a handoff moves a step of the killed agent, not of %s", k.KillID, h.From)
		case h.Status == HandoffDone && ValidActorID(h.To) && h.To != k.Agent:
			handedOff++
		case h.Status == HandoffCompensation && h.To == "":
		default:
			return 0, fmt.Errorf("kill %s: handoff of step %s: status %q with substitute %q", k.KillID, h.Step, h.Status, h.To)
		}
	}
	return handedOff, nil
}

func validateKillReason(r string) error {
	if !killswitch.Reason(r).Valid() {
		return fmt.Errorf("kill reason %q is not one of %v (§12.2)", r, killswitch.Reasons())
	}
	return nil
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindAgentKilled] = carries(must("kill"), may("session"))
}
