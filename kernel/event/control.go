package event

import (
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/saga"
	"github.com/annal-dev/annal/kernel/session"
)

// The kinds of event that record execution control (Agent Hypervisor
// Execution Control 1.0 and the Agent OS policy engine): every decision
// that changes what an agent may do is one of them, so replaying the log
// reproduces every ring, elevation, quarantine, session and policy.
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
	// KindElevationGranted records a time-bounded ring elevation (§8).
	KindElevationGranted Kind = "elevation.granted"
	// KindElevationEnded records an elevation revoked or expired.
	KindElevationEnded Kind = "elevation.ended"
	// KindSessionCreated records a new session and its configuration (§10).
	KindSessionCreated Kind = "session.created"
	// KindSessionChanged records a session's state change, a participant
	// joining or leaving, a cross-session grant or a substitute (§10–§12).
	KindSessionChanged Kind = "session.changed"
	// KindQuarantineStarted and KindQuarantineEnded bracket a quarantine (§13).
	KindQuarantineStarted Kind = "quarantine.started"
	KindQuarantineEnded   Kind = "quarantine.ended"
	// KindAgentKilled records the kill switch (§12): the agent is frozen,
	// its envelopes revoked, its in-flight saga steps handed off or marked
	// for compensation.
	KindAgentKilled Kind = "agent.killed"
	// KindSagaStarted and KindSagaStep record a saga and each step's
	// transitions (§15).
	KindSagaStarted Kind = "saga.started"
	KindSagaStep    Kind = "saga.step"
	// KindPolicySet records a named policy, versioned (Agent OS).
	KindPolicySet Kind = "policy.set"
	// KindPolicyAttached records a policy attached to (or detached from)
	// an agent or an envelope.
	KindPolicyAttached Kind = "policy.attached"
	// KindSignalSent records a signal delivered to an agent and its effect.
	KindSignalSent Kind = "signal.sent"
	// KindSignalMasked records the maskable signals an agent handles itself.
	KindSignalMasked Kind = "signal.masked"
)

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

// RingConfig is carried by rings.configured.
type RingConfig struct {
	// NetworkAllowlist is where Ring 2 agents may connect ("host",
	// "host:port" or "*.domain"); empty means nowhere.
	NetworkAllowlist []string `json:"network_allowlist"`
}

// DescriptorRegistration is carried by action.registered: a descriptor
// and the actions it classifies. An action matched by several descriptors
// needs the most privileged ring any of them requires.
type DescriptorRegistration struct {
	Descriptor ring.Descriptor `json:"descriptor"`
	AppliesTo  []Grant         `json:"applies_to"`
}

// Elevation is carried by elevation.granted.
type Elevation struct {
	ID      string  `json:"id"`
	Agent   string  `json:"agent"`
	From    int     `json:"from"`
	Ring    int     `json:"ring"`
	TrustBP uint64  `json:"trust_bp"`
	Expires Instant `json:"expires"`
	// AttestedBy is the human whose authenticated request granted a Ring 1
	// elevation (§8.2's sponsor attestation).
	AttestedBy string `json:"attested_by,omitempty"`
	Reason     string `json:"reason"`
}

// Ends of an elevation or a quarantine.
const (
	EndExpired  = "expired"
	EndRevoked  = "revoked"
	EndReleased = "released"
	// EndUntrusted: the kernel ended an elevation that its agent's recorded
	// trust score no longer earns (after a demotion, §8.4).
	EndUntrusted = "untrusted"
)

// ElevationEnd is carried by elevation.ended.
type ElevationEnd struct {
	ID     string `json:"id"`
	Agent  string `json:"agent"`
	End    string `json:"end"`
	Reason string `json:"reason,omitempty"`
}

// SessionRecord is carried by session.created; the event's Session names it.
type SessionRecord struct {
	Config session.Config `json:"config"`
}

// Session change operations.
const (
	SessionOpState      = "state"
	SessionOpJoin       = "join"
	SessionOpLeave      = "leave"
	SessionOpGrant      = "grant"
	SessionOpSubstitute = "substitute"
)

// SessionChange is carried by session.changed.
type SessionChange struct {
	Op string `json:"op"`
	// State is the new state (op "state").
	State string `json:"state,omitempty"`
	// Agent joins, leaves or becomes the substitute.
	Agent string `json:"agent,omitempty"`
	// Ring and the scores are the joining agent's at the time (§10.3).
	Ring       int    `json:"ring,omitempty"`
	EffScoreBP uint64 `json:"eff_score_bp,omitempty"`
	// Granted is the session this one may read (op "grant", §11.5).
	Granted string `json:"granted,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Quarantine is carried by quarantine.started and quarantine.ended; the
// event's Session, if set, limits it to one session.
type Quarantine struct {
	Agent     string  `json:"agent"`
	Reason    string  `json:"reason,omitempty"`
	StartedAt Instant `json:"started_at,omitzero"`
	ExpiresAt Instant `json:"expires_at,omitzero"`
	// End is "released" or "expired" (quarantine.ended).
	End string `json:"end,omitempty"`
}

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

// SagaRecord is carried by saga.started.
type SagaRecord struct {
	ID    string          `json:"id"`
	Steps []saga.StepSpec `json:"steps"`
}

// SagaStep is carried by saga.step: one transition of one step.
type SagaStep struct {
	Saga       string `json:"saga"`
	Step       string `json:"step"`
	Transition string `json:"transition"`
	Reason     string `json:"reason,omitempty"`
	// To is the substitute a handed-off step now belongs to.
	To string `json:"to,omitempty"`
}

// Saga step transitions.
const (
	SagaStart              = "started"
	SagaSucceeded          = "succeeded"
	SagaFailed             = "failed"
	SagaTimedOut           = "timed_out"
	SagaCompensating       = "compensating"
	SagaCompensated        = "compensated"
	SagaCompensationFailed = "compensation_failed"
)

// PolicyRecord is carried by policy.set: version 1 for a new name, one
// more than the last for a change.
type PolicyRecord struct {
	Policy  policy.Policy `json:"policy"`
	Version uint64        `json:"version"`
}

// PolicyAttachment is carried by policy.attached: exactly one of Agent and
// Envelope is set.
type PolicyAttachment struct {
	Policy   string `json:"policy"`
	Agent    string `json:"agent,omitempty"`
	Envelope string `json:"envelope,omitempty"`
	Detach   bool   `json:"detach,omitempty"`
}

// SignalRecord is carried by signal.sent.
type SignalRecord struct {
	Agent  string `json:"agent"`
	Signal string `json:"signal"`
	Effect string `json:"effect"`
	Reason string `json:"reason,omitempty"`
	// Revoked lists the envelopes a terminating signal revoked.
	Revoked []string `json:"revoked,omitempty"`
}

// SignalMask is carried by signal.masked.
type SignalMask struct {
	Agent string   `json:"agent"`
	Mask  []string `json:"mask"`
}
