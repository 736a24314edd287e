package event

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/annal-dev/annal/kernel/internal/killswitch"
	"github.com/annal-dev/annal/kernel/internal/quarantine"
	"github.com/annal-dev/annal/kernel/internal/signal"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
)

var elevationIDPattern = regexp.MustCompile(`^elev-[0-9a-f]{12,32}$`)

// ValidElevationID reports whether id can name an elevation.
func ValidElevationID(id string) bool { return elevationIDPattern.MatchString(id) }

func validRing(r int) bool { return r >= 0 && r <= 3 }

func validateAgentRef(what, id string) error {
	if !ValidActorID(id) {
		return fmt.Errorf("%s %q is not an actor id", what, id)
	}
	return nil
}

func (e *Event) validateControl() error {
	var err error
	switch {
	case e.Ring != nil:
		r := e.Ring
		if err = validateAgentRef("ring agent", r.Agent); err == nil {
			switch {
			case r.TrustBP > 10000:
				err = fmt.Errorf("trust_bp %d is more than 10000 (1.0)", r.TrustBP)
			case !validRing(r.Ring) || r.Ring == int(ring.Root):
				err = fmt.Errorf("ring %d: an agent is assigned ring 1, 2 or 3; ring 0 never (§4.1)", r.Ring)
			case r.Ring < int(ring.FromEffScore(ring.Score(r.TrustBP), r.Consensus)):
				err = fmt.Errorf("ring %d is more privileged than trust %d bp (consensus %v) gives (§4.1)", r.Ring, r.TrustBP, r.Consensus)
			default:
				err = validateText("ring reason", r.Reason, 1024)
			}
		}
	case e.RingConfig != nil:
		if len(e.RingConfig.NetworkAllowlist) > 256 {
			return fmt.Errorf("network allowlist has %d entries, more than 256", len(e.RingConfig.NetworkAllowlist))
		}
		for _, d := range e.RingConfig.NetworkAllowlist {
			if err := ring.ParseAllowEntry(d); err != nil {
				return err
			}
		}
	case e.Descriptor != nil:
		if err = e.Descriptor.Descriptor.Validate(); err == nil {
			if len(e.Descriptor.AppliesTo) == 0 {
				err = fmt.Errorf("descriptor %s applies to no action", e.Descriptor.Descriptor.ActionID)
			} else {
				err = validateGrants("descriptor "+e.Descriptor.Descriptor.ActionID, e.Descriptor.AppliesTo)
			}
		}
	case e.Elevation != nil:
		v := e.Elevation
		switch {
		case !ValidElevationID(v.ID):
			err = fmt.Errorf("elevation id %q is not valid", v.ID)
		case !ValidActorID(v.Agent):
			err = fmt.Errorf("elevation %s: agent %q is not an actor id", v.ID, v.Agent)
		case !validRing(v.From) || !validRing(v.Ring) || v.Ring == 0 || v.Ring >= v.From:
			err = fmt.Errorf("elevation %s from ring %d to ring %d: the target must be more privileged, and never ring 0 (§8.7)", v.ID, v.From, v.Ring)
		case v.TrustBP > 10000:
			err = fmt.Errorf("elevation %s: trust_bp %d is more than 10000", v.ID, v.TrustBP)
		case v.Expires.IsZero():
			err = fmt.Errorf("elevation %s has no expiry (§8.5: elevations are time-bounded)", v.ID)
		case v.Ring == int(ring.Privileged) && v.AttestedBy == "":
			err = fmt.Errorf("elevation %s to ring 1 has no attestation (§8.3 no_sponsorship)", v.ID)
		case v.AttestedBy != "" && !ValidActorID(v.AttestedBy):
			err = fmt.Errorf("elevation %s: attested_by %q is not an actor id", v.ID, v.AttestedBy)
		case v.Reason == "":
			err = fmt.Errorf("elevation %s has no reason (§8.2: an elevation needs one)", v.ID)
		default:
			if err = validateTime("elevation expiry", v.Expires); err == nil {
				err = validateText("elevation reason", v.Reason, 1024)
			}
		}
	case e.ElevationEnd != nil:
		v := e.ElevationEnd
		switch {
		case !ValidElevationID(v.ID) || !ValidActorID(v.Agent):
			err = fmt.Errorf("elevation end names %q of %q: not valid ids", v.ID, v.Agent)
		case v.End != EndExpired && v.End != EndRevoked && v.End != EndUntrusted:
			err = fmt.Errorf("elevation %s: end %q is not expired, revoked or untrusted", v.ID, v.End)
		default:
			err = validateText("elevation end reason", v.Reason, 1024)
		}
	case e.SessionRecord != nil:
		err = e.SessionRecord.Config.Validate()
	case e.SessionChange != nil:
		err = e.SessionChange.validate()
	case e.Quarantine != nil:
		err = e.Quarantine.validate(e.Kind)
	case e.Kill != nil:
		err = e.Kill.validate()
	case e.Saga != nil:
		err = saga.ValidateSteps(e.Saga.Steps)
		if err == nil && !delta.ValidIdentifier(e.Saga.ID) {
			err = fmt.Errorf("saga id %q does not match the identifier pattern (§17.1)", e.Saga.ID)
		}
	case e.SagaStep != nil:
		s := e.SagaStep
		switch {
		case !delta.ValidIdentifier(s.Saga) || !delta.ValidIdentifier(s.Step):
			err = fmt.Errorf("saga step %q of %q: not valid identifiers (§17.1)", s.Step, s.Saga)
		case !slices.Contains([]string{SagaStart, SagaSucceeded, SagaFailed, SagaTimedOut, SagaCompensating, SagaCompensated, SagaCompensationFailed}, s.Transition):
			err = fmt.Errorf("saga %s step %s: transition %q is unknown", s.Saga, s.Step, s.Transition)
		case s.To != "":
			err = fmt.Errorf("saga %s step %s: only a kill hands a step to another agent", s.Saga, s.Step)
		default:
			err = validateText("saga step reason", s.Reason, 1024)
		}
	case e.Policy != nil:
		if err = e.Policy.Policy.Validate(); err == nil && e.Policy.Version == 0 {
			err = fmt.Errorf("policy %s: version starts at 1", e.Policy.Policy.Name)
		}
	case e.PolicyAttachment != nil:
		p := e.PolicyAttachment
		switch {
		case policy.ValidName(p.Policy) != nil:
			err = policy.ValidName(p.Policy)
		case (p.Agent == "") == (p.Envelope == ""):
			err = fmt.Errorf("policy %s is attached to exactly one agent or one envelope", p.Policy)
		case p.Agent != "" && !ValidActorID(p.Agent):
			err = fmt.Errorf("policy %s: agent %q is not an actor id", p.Policy, p.Agent)
		case p.Envelope != "" && !ValidEnvelopeID(p.Envelope):
			err = fmt.Errorf("policy %s: envelope %q is not an envelope id", p.Policy, p.Envelope)
		}
	case e.Signal != nil:
		err = e.Signal.validate()
	case e.SignalMask != nil:
		if err = validateAgentRef("signal mask agent", e.SignalMask.Agent); err == nil {
			err = validateMask(e.SignalMask.Mask)
		}
	}
	return err
}

func (c *SessionChange) validate() error {
	switch c.Op {
	case SessionOpState:
		if !session.State(c.State).Valid() {
			return fmt.Errorf("session state %q is unknown", c.State)
		}
	case SessionOpJoin:
		if !validRing(c.Ring) || c.EffScoreBP > 10000 {
			return fmt.Errorf("join of %s: ring %d or eff_score_bp %d out of range", c.Agent, c.Ring, c.EffScoreBP)
		}
		fallthrough
	case SessionOpLeave, SessionOpSubstitute:
		if err := validateAgentRef("session participant", c.Agent); err != nil {
			return err
		}
	case SessionOpGrant:
		if !delta.ValidIdentifier(c.Granted) {
			return fmt.Errorf("granted session %q does not match the identifier pattern (§17.1)", c.Granted)
		}
	default:
		return fmt.Errorf("session change op %q is not state, join, leave, grant or substitute", c.Op)
	}
	return validateText("session change reason", c.Reason, 1024)
}

func (q *Quarantine) validate(kind Kind) error {
	if err := validateAgentRef("quarantined agent", q.Agent); err != nil {
		return err
	}
	if kind == KindQuarantineStarted {
		if q.End != "" || q.StartedAt.IsZero() || q.ExpiresAt.IsZero() {
			return fmt.Errorf("quarantine of %s: a start carries started_at and expires_at, no end", q.Agent)
		}
		if err := validateQuarantineReason(q.Reason); err != nil {
			return err
		}
		if err := validateTime("quarantine start", q.StartedAt); err != nil {
			return err
		}
		if err := validateTime("quarantine expiry", q.ExpiresAt); err != nil {
			return err
		}
		if !q.ExpiresAt.After(q.StartedAt) {
			return fmt.Errorf("quarantine of %s expires at %s, not after its start %s", q.Agent, q.ExpiresAt, q.StartedAt)
		}
		return nil
	}
	if q.End != EndReleased && q.End != EndExpired {
		return fmt.Errorf("quarantine of %s: end %q is not released or expired", q.Agent, q.End)
	}
	if !q.StartedAt.IsZero() || !q.ExpiresAt.IsZero() {
		return fmt.Errorf("quarantine end of %s carries no times", q.Agent)
	}
	return validateText("quarantine reason", q.Reason, 1024)
}

func (k *Kill) validate() error {
	if !validUUID(k.KillID) {
		return fmt.Errorf("kill_id %q is not a lower-case UUID", k.KillID)
	}
	if err := validateAgentRef("killed agent", k.Agent); err != nil {
		return err
	}
	if err := validateKillReason(k.Reason); err != nil {
		return err
	}
	var ok uint64
	for _, h := range k.Handoffs {
		switch {
		case !delta.ValidIdentifier(h.Saga) || !delta.ValidIdentifier(h.Step):
			return fmt.Errorf("kill %s: handoff of step %q of saga %q: not valid identifiers", k.KillID, h.Step, h.Saga)
		case h.From != k.Agent:
			return fmt.Errorf("kill %s: a handoff moves a step of the killed agent, not of %s", k.KillID, h.From)
		case h.Status == HandoffDone && ValidActorID(h.To) && h.To != k.Agent:
			ok++
		case h.Status == HandoffCompensation && h.To == "":
		default:
			return fmt.Errorf("kill %s: handoff of step %s: status %q with substitute %q", k.KillID, h.Step, h.Status, h.To)
		}
	}
	if ok != k.HandoffSuccessCount {
		return fmt.Errorf("kill %s: handoff_success_count %d, but %d handoffs succeeded", k.KillID, k.HandoffSuccessCount, ok)
	}
	if k.CompensationTriggered != (uint64(len(k.Handoffs)) > ok) {
		return fmt.Errorf("kill %s: compensation_triggered must say whether any step is marked for compensation", k.KillID)
	}
	for _, id := range k.Revoked {
		if !ValidEnvelopeID(id) {
			return fmt.Errorf("kill %s: revoked envelope %q is not an envelope id", k.KillID, id)
		}
	}
	return validateText("kill details", k.Details, 2048)
}

// Signal effects (kernel/signal).
const (
	EffectStop      = "stop"
	EffectContinue  = "continue"
	EffectTerminate = "terminate"
	EffectQueue     = "queue"
	EffectNone      = "none"
)

func (s *SignalRecord) validate() error {
	if err := validateAgentRef("signalled agent", s.Agent); err != nil {
		return err
	}
	if err := validateSignalName(s.Signal); err != nil {
		return err
	}
	if !slices.Contains([]string{EffectStop, EffectContinue, EffectTerminate, EffectQueue, EffectNone}, s.Effect) {
		return fmt.Errorf("signal %s: effect %q is unknown", s.Signal, s.Effect)
	}
	if s.Effect != EffectTerminate && len(s.Revoked) > 0 {
		return fmt.Errorf("signal %s: only a terminating signal revokes envelopes", s.Signal)
	}
	for _, id := range s.Revoked {
		if !ValidEnvelopeID(id) {
			return fmt.Errorf("signal %s: revoked envelope %q is not an envelope id", s.Signal, id)
		}
	}
	return validateText("signal reason", s.Reason, 1024)
}

// Resources is what an action declares it will use (§7): the gates check
// it against the acting agent's ring, and the event records it.
type Resources struct {
	Network         []string `json:"network,omitempty"`
	FilesystemRead  []string `json:"fs_read,omitempty"`
	FilesystemWrite []string `json:"fs_write,omitempty"`
	Subprocess      bool     `json:"subprocess,omitempty"`
	Tools           uint64   `json:"tools,omitempty"`
}

// MaxResourceEntries bounds each list of Resources.
const MaxResourceEntries = 64

func (r *Resources) validate() error {
	for _, list := range [][]string{r.Network, r.FilesystemRead, r.FilesystemWrite} {
		if len(list) > MaxResourceEntries {
			return fmt.Errorf("resources: %d entries in one list, more than %d", len(list), MaxResourceEntries)
		}
		for _, s := range list {
			if s == "" {
				return fmt.Errorf("resources: an empty entry")
			}
			if err := validateText("resource entry", s, MaxTargetSize); err != nil {
				return err
			}
		}
	}
	// Declared paths are logged clean, so every rule judges the path the
	// action will use: "x/../sessions/s" is "sessions/s".
	for _, p := range slices.Concat(r.FilesystemRead, r.FilesystemWrite) {
		if c := path.Clean(p); c != p || c == ".." || strings.HasPrefix(c, "../") {
			return fmt.Errorf("resources: path %q is not in clean form (%q) inside the target namespace", p, c)
		}
	}
	if r.Tools > 1024 {
		return fmt.Errorf("resources: %d concurrent tools, more than 1024", r.Tools)
	}
	return nil
}

func validateQuarantineReason(r string) error {
	if !quarantine.Reason(r).Valid() {
		return fmt.Errorf("quarantine reason %q is not one of %v (§13.1)", r, quarantine.Reasons())
	}
	return nil
}

func validateKillReason(r string) error {
	if !killswitch.Reason(r).Valid() {
		return fmt.Errorf("kill reason %q is not one of %v (§12.2)", r, killswitch.Reasons())
	}
	return nil
}

// validateSignalName accepts a signal's canonical name only ("SIGSTOP").
func validateSignalName(name string) error {
	s, err := signal.Parse(name)
	if err != nil {
		return err
	}
	if s.String() != name {
		return fmt.Errorf("signal %q is not written as %s", name, s)
	}
	return nil
}

// validateMask accepts distinct maskable signals, canonical names sorted.
func validateMask(names []string) error {
	var m signal.Mask
	for _, n := range names {
		if err := validateSignalName(n); err != nil {
			return err
		}
		s, _ := signal.Parse(n)
		if m.Has(s) {
			return fmt.Errorf("signal mask names %s twice", n)
		}
		var err error
		if m, err = m.With(s); err != nil {
			return err
		}
	}
	if !slices.IsSorted(names) {
		return fmt.Errorf("signal mask must list names sorted")
	}
	return nil
}
