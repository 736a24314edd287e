// Package api holds the JSON shapes of Annal's HTTP API, shared by the
// server and the thin client so that neither can drift from the other. It
// imports nothing of the kernel: an agent that embeds the client pulls in
// no storage code.
package api

import "encoding/json"

// Limits on request bodies. A log entry is at most 65,535 bytes, so an
// action body larger than MaxActionBody could never be committed anyway.
const (
	MaxActionBody = 256 << 10
	MaxAgentBody  = 16 << 10
)

// ActionRequest is the body of POST /v1/actions.
type ActionRequest struct {
	// Type is observe, create, mutate or execute.
	Type string `json:"type"`
	// Target is a '/'-separated path such as "workspace/notes.md".
	Target string `json:"target"`
	// Payload is any JSON value; the log stores its RFC 8785 canonical form.
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadHash, "sha256:<64 hex>", replaces Payload for content kept
	// outside the log (a log entry is at most 65,535 bytes).
	PayloadHash string `json:"payload_hash,omitempty"`
}

// Receipt is the answer to a committed action.
type Receipt struct {
	EventID  string `json:"event_id"`
	Index    uint64 `json:"index"`
	LeafHash string `json:"leaf_hash"`
	Time     string `json:"time"`
	Actor    string `json:"actor"`
	Type     string `json:"type"`
	Target   string `json:"target"`
	Cost     uint64 `json:"cost"`
	// Checkpoint (a signed note) and Proof (c2sp.org/tlog-proof text) are
	// present when the request asked for ?wait=published.
	Checkpoint string `json:"checkpoint,omitempty"`
	Proof      string `json:"proof,omitempty"`
	// ProofError says why a requested proof is missing; the action is
	// committed all the same.
	ProofError string `json:"proof_error,omitempty"`
}

// AgentRequest is the body of POST /v1/agents.
type AgentRequest struct {
	Name    string `json:"name"`
	Purpose string `json:"purpose"`
	Expires string `json:"expires,omitempty"`
}

// Agent is the answer to POST /v1/agents. The credential is shown once.
type Agent struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Purpose    string `json:"purpose"`
	Creator    string `json:"creator"`
	Expires    string `json:"expires,omitempty"`
	Credential string `json:"credential"`
	Index      uint64 `json:"index"`
}

// Info is the answer to GET /v1/info.
type Info struct {
	Origin         string `json:"origin"`
	VerifierKey    string `json:"verifier_key"`
	Size           uint64 `json:"size"`
	CheckpointSize uint64 `json:"checkpoint_size"`
}

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	Error string `json:"error"`
	// Stage is the pipeline stage that denied an action, if one did.
	Stage string `json:"stage,omitempty"`
}
