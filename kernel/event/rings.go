package event

import (
	"fmt"

	"github.com/annal-dev/annal/kernel/ring"
)

// The kinds of event that set rings (Agent Hypervisor Execution Control
// §4–§7): what ring an agent is in, what Ring 2 may reach, and which ring
// an action needs.
const (
	// KindRingAssigned records a human setting an agent's trust score and
	// consensus, and the ring they give (§4).
	KindRingAssigned Kind = "agent.ring"
	// KindRingsConfigured records root's ring-wide settings (§7: the
	// network allowlist of Ring 2).
	KindRingsConfigured Kind = "rings.configured"
	// KindActionRegistered records an action descriptor (§5) and the
	// actions it classifies.
	KindActionRegistered Kind = "action.registered"
)

func validRing(r int) bool { return r >= 0 && r <= 3 }

// RingAssignment is carried by agent.ring.
type RingAssignment struct {
	Agent string `json:"agent"`
	// TrustBP is the effective trust score in basis points (0.97 = 9700):
	// events carry no floats, so thresholds compare exactly.
	TrustBP   uint64 `json:"trust_bp"`
	Consensus bool   `json:"consensus,omitempty"`
	// Ring is the ring the score gives (§4.1), or a less privileged one a
	// human chose (demotion).
	Ring   int    `json:"ring"`
	Reason string `json:"reason,omitempty"`
}

func (r *RingAssignment) check(*Event) error {
	if err := validateAgentRef("ring agent", r.Agent); err != nil {
		return err
	}
	switch {
	case r.TrustBP > 10000:
		return fmt.Errorf("trust_bp %d is more than 10000 (1.0)", r.TrustBP)
	case !validRing(r.Ring) || r.Ring == int(ring.Root):
		return fmt.Errorf("ring %d: an agent is assigned ring 1, 2 or 3; ring 0 never (§4.1)", r.Ring)
	case r.Ring < int(ring.FromEffScore(ring.Score(r.TrustBP), r.Consensus)):
		return fmt.Errorf("ring %d is more privileged than trust %d bp (consensus %v) gives (§4.1)", r.Ring, r.TrustBP, r.Consensus)
	}
	return validateText("ring reason", r.Reason, 1024)
}

// RingConfig is carried by rings.configured.
type RingConfig struct {
	// NetworkAllowlist is where Ring 2 agents may connect ("host",
	// "host:port" or "*.domain"); empty means nowhere.
	NetworkAllowlist []string `json:"network_allowlist"`
}

func (c *RingConfig) check(*Event) error {
	if len(c.NetworkAllowlist) > 256 {
		return fmt.Errorf("network allowlist has %d entries, more than 256", len(c.NetworkAllowlist))
	}
	for _, d := range c.NetworkAllowlist {
		if err := ring.ParseAllowEntry(d); err != nil {
			return err
		}
	}
	return nil
}

// DescriptorRegistration is carried by action.registered: a descriptor
// and the actions it classifies. An action matched by several descriptors
// needs the most privileged ring any of them requires.
type DescriptorRegistration struct {
	Descriptor ring.Descriptor `json:"descriptor"`
	AppliesTo  []Grant         `json:"applies_to"`
}

func (d *DescriptorRegistration) check(*Event) error {
	if err := d.Descriptor.Validate(); err != nil {
		return err
	}
	if len(d.AppliesTo) == 0 {
		return fmt.Errorf("descriptor %s applies to no action", d.Descriptor.ActionID)
	}
	return validateGrants("descriptor "+d.Descriptor.ActionID, d.AppliesTo)
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindRingAssigned] = carries(must("ring"))
	kinds[KindRingsConfigured] = carries(must("ring_config"))
	kinds[KindActionRegistered] = carries(must("descriptor"))
}
