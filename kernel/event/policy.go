package event

import (
	"fmt"

	"github.com/annal-dev/annal/kernel/policy"
)

// The kinds of event about policies (the Agent OS policy engine).
const (
	// KindPolicySet records a named policy, versioned (Agent OS).
	KindPolicySet Kind = "policy.set"
	// KindPolicyAttached records a policy attached to (or detached from)
	// an agent or an envelope.
	KindPolicyAttached Kind = "policy.attached"
)

// PolicyRecord is carried by policy.set: version 1 for a new name, one
// more than the last for a change.
type PolicyRecord struct {
	Policy  policy.Policy `json:"policy"`
	Version uint64        `json:"version"`
}

func (p *PolicyRecord) check(*Event) error {
	if err := p.Policy.Validate(); err != nil {
		return err
	}
	if p.Version == 0 {
		return fmt.Errorf("policy %s: version starts at 1", p.Policy.Name)
	}
	return nil
}

// PolicyAttachment is carried by policy.attached: exactly one of Agent and
// Envelope is set.
type PolicyAttachment struct {
	Policy   string `json:"policy"`
	Agent    string `json:"agent,omitempty"`
	Envelope string `json:"envelope,omitempty"`
	Detach   bool   `json:"detach,omitempty"`
}

func (p *PolicyAttachment) check(*Event) error {
	if err := policy.ValidName(p.Policy); err != nil {
		return err
	}
	switch {
	case (p.Agent == "") == (p.Envelope == ""):
		return fmt.Errorf("policy %s is attached to exactly one agent or one envelope", p.Policy)
	case p.Agent != "" && !ValidActorID(p.Agent):
		return fmt.Errorf("policy %s: agent %q is not an actor id", p.Policy, p.Agent)
	case p.Envelope != "" && !ValidEnvelopeID(p.Envelope):
		return fmt.Errorf("policy %s: envelope %q is not an envelope id", p.Policy, p.Envelope)
	}
	return nil
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindPolicySet] = carries(must("policy"))
	kinds[KindPolicyAttached] = carries(must("policy_attachment"))
}
