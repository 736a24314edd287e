package api

import "encoding/json"

// The bodies of the execution control API (Agent Hypervisor Execution
// Control 1.0 and Agent OS policies). Views (rings, sessions, sagas,
// quarantines, policies) are returned as the kernel's JSON records; the
// thin client hands them to callers as raw JSON.

// MaxControlBody bounds every execution control request body.
const MaxControlBody = 64 << 10

// RingRequest is the body of POST /v1/agents/{id}/ring.
type RingRequest struct {
	Trust     float64 `json:"trust"`
	Consensus bool    `json:"consensus,omitempty"`
	// Ring, if set, demotes the agent below what its score gives.
	Ring   *int   `json:"ring,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// RingConfigRequest is the body of PUT /v1/rings/config.
type RingConfigRequest struct {
	NetworkAllowlist []string `json:"network_allowlist"`
}

// DescriptorRequest is the body of PUT /v1/descriptors/{id}: an action
// descriptor (§5.1, its JSON fields as the spec names them) and the
// actions it classifies.
type DescriptorRequest struct {
	Descriptor json.RawMessage `json:"descriptor"`
	AppliesTo  []Grant         `json:"applies_to"`
}

// ElevationRequest is the body of POST /v1/elevations.
type ElevationRequest struct {
	Agent      string `json:"agent"`
	Session    string `json:"session,omitempty"`
	Ring       int    `json:"ring"`
	TTLSeconds int64  `json:"ttl_seconds,omitempty"`
	Reason     string `json:"reason"`
}

// ReasonRequest is a body that only gives a reason.
type ReasonRequest struct {
	Reason string `json:"reason,omitempty"`
}

// SessionRequest is the body of POST /v1/sessions; Config is the §10.2
// configuration (min_eff_score as a number from 0 to 1).
type SessionRequest struct {
	ID     string          `json:"id,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`
}

// SessionChangeRequest is the body of POST /v1/sessions/{id}/changes: op
// is state, join, leave, grant, substitute, lock, unlock or ack. Path is
// the path of the session's folder an intent lock is on (lock, unlock:
// SERIALIZABLE); Head the chain head an ack acknowledges (STRONG; empty:
// the head when the ack is decided).
type SessionChangeRequest struct {
	Op      string `json:"op"`
	State   string `json:"state,omitempty"`
	Agent   string `json:"agent,omitempty"`
	Granted string `json:"granted,omitempty"`
	Path    string `json:"path,omitempty"`
	Head    string `json:"head,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Change is one file change of an agent turn.
type Change struct {
	Path        string `json:"path"`
	Operation   string `json:"operation"`
	ContentHash string `json:"content_hash,omitempty"`
}

// DeltaRequest is the body of POST /v1/sessions/{id}/deltas.
type DeltaRequest struct {
	TurnID  string   `json:"turn_id"`
	Changes []Change `json:"changes"`
}

// KillRequest is the body of POST /v1/agents/{id}/kill.
type KillRequest struct {
	Reason  string `json:"reason"`
	Session string `json:"session,omitempty"`
	Details string `json:"details,omitempty"`
}

// QuarantineRequest is the body of POST /v1/agents/{id}/quarantine.
type QuarantineRequest struct {
	Reason          string `json:"reason"`
	Session         string `json:"session,omitempty"`
	DurationSeconds int64  `json:"duration_seconds,omitempty"`
}

// ReleaseRequest is the body of POST /v1/agents/{id}/release.
type ReleaseRequest struct {
	Session string `json:"session,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// SignalRequest is the body of POST /v1/agents/{id}/signal.
type SignalRequest struct {
	Signal string `json:"signal"`
	Reason string `json:"reason,omitempty"`
}

// MaskRequest is the body of PUT /v1/signals/mask.
type MaskRequest struct {
	Mask []string `json:"mask"`
}

// Step is one step of a saga; absent retries and timeout take §15.2's
// defaults (2 retries, 300 s).
type Step struct {
	ID             string      `json:"id"`
	Action         string      `json:"action"`
	Compensation   string      `json:"compensation"`
	Compensate     *Compensate `json:"compensate,omitempty"`
	MaxRetries     *int        `json:"max_retries,omitempty"`
	TimeoutSeconds *int        `json:"timeout_seconds,omitempty"`
}

// Compensate is a step's compensation that Annal runs itself (annal sagas
// run): a command line (Argv), run as annal exec runs it, or a call of Tool
// of the MCP server the gate names Server, with Arguments a JSON object as
// text. Exactly one of the two.
type Compensate struct {
	Argv      []string `json:"argv,omitempty"`
	Server    string   `json:"server,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	Arguments string   `json:"arguments,omitempty"`
}

// SagaRequest is the body of POST /v1/sagas.
type SagaRequest struct {
	ID      string `json:"id,omitempty"`
	Session string `json:"session,omitempty"`
	Steps   []Step `json:"steps"`
}

// StepReport is the body of POST /v1/sagas/{id}/steps/{step}: transition
// is started, succeeded, failed, compensating, compensated or
// compensation_failed.
type StepReport struct {
	Transition string `json:"transition"`
	Reason     string `json:"reason,omitempty"`
}

// AttachRequest is the body of POST /v1/policies/{name}/attach.
type AttachRequest struct {
	Agent    string `json:"agent,omitempty"`
	Envelope string `json:"envelope,omitempty"`
	Detach   bool   `json:"detach,omitempty"`
}

// Controlled is the answer to an execution control change: the receipt of
// its event, and the record it made or changed, when there is one.
type Controlled struct {
	Receipt Receipt         `json:"receipt"`
	Record  json.RawMessage `json:"record,omitempty"`
}
