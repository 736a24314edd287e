package event

import (
	"fmt"
	"strings"
)

// The kinds of event about envelopes (Def. 4.13).
const (
	// KindEnvelopeIssued records a new envelope (Def. 4.13).
	KindEnvelopeIssued Kind = "envelope.issued"
	// KindEnvelopeRevoked records an envelope revoked by its issuer or root.
	KindEnvelopeRevoked Kind = "envelope.revoked"
)

// Envelope is carried by envelope.issued: a temporary authorisation of
// Holder, issued by Issuer, spending at most Budget (Def. 4.13, 4.18).
type Envelope struct {
	ID     string `json:"id"`
	Holder string `json:"holder"`
	Issuer string `json:"issuer"`
	// Parent is the envelope this one was delegated from, if any (Remark 4.3).
	Parent string  `json:"parent,omitempty"`
	Budget uint64  `json:"budget"`
	Grants []Grant `json:"grants"`
	// HoldOn lists the actions that wait for a human's answer (Def. 4.19).
	HoldOn []Grant `json:"hold_on,omitempty"`
	// HoldTimeoutSecs, if set, ends an unanswered hold as a timeout.
	HoldTimeoutSecs uint64  `json:"hold_timeout_secs,omitempty"`
	Expires         Instant `json:"expires,omitzero"`
	// RequireSigned: actions under the envelope must be signed by their
	// actor (signed.go).
	RequireSigned bool `json:"require_signed,omitempty"`
	// SealPayloads: payloads of actions under the envelope are sealed
	// (sealed.go).
	SealPayloads bool `json:"seal_payloads,omitempty"`
}

// ValidEnvelopeID reports whether id can name an envelope: "env-" and 1 to
// 60 lower-case letters, digits or '-'.
func ValidEnvelopeID(id string) bool {
	rest, ok := strings.CutPrefix(id, "env-")
	return ok && len(rest) > 0 && len(rest) <= 60 && strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

func (v *Envelope) check(*Event) error {
	switch {
	case !ValidEnvelopeID(v.ID):
		return fmt.Errorf("envelope id %q is not valid", v.ID)
	case !ValidActorID(v.Holder) || !ValidActorID(v.Issuer):
		return fmt.Errorf("envelope %s: holder and issuer must be actor ids", v.ID)
	case v.Parent != "" && !ValidEnvelopeID(v.Parent):
		return fmt.Errorf("envelope %s: parent %q is not an envelope id", v.ID, v.Parent)
	case v.Budget > MaxEnergy:
		return fmt.Errorf("envelope %s: budget above 2^53", v.ID)
	case len(v.Grants) == 0:
		return fmt.Errorf("envelope %s grants nothing", v.ID)
	}
	if err := validateGrants("envelope "+v.ID, v.Grants); err != nil {
		return err
	}
	if err := validateGrants("envelope "+v.ID+" hold_on", v.HoldOn); err != nil {
		return err
	}
	return validateTime("envelope "+v.ID+" expiry", v.Expires)
}

// EnvelopeEnd is carried by envelope.revoked.
type EnvelopeEnd struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

func (v *EnvelopeEnd) check(*Event) error {
	if !ValidEnvelopeID(v.ID) {
		return fmt.Errorf("envelope id %q is not valid", v.ID)
	}
	return validateText("revocation reason", v.Reason, 1024)
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindEnvelopeIssued] = carries(must("envelope"))
	kinds[KindEnvelopeRevoked] = carries(must("envelope_end"))
}
