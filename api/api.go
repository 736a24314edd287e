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
	// Envelope names the envelope an agent acts under; empty lets the
	// kernel pick the oldest live one that grants the action.
	Envelope string `json:"envelope,omitempty"`
	// Session is the session the action runs in.
	Session string `json:"session,omitempty"`
	// ActionID names a registered action descriptor.
	ActionID string `json:"action_id,omitempty"`
	// Resources declares what the action uses (network destinations,
	// files read and written, a subprocess, concurrent tools), checked
	// against the agent's ring.
	Resources *Resources `json:"resources,omitempty"`
	// Seal keeps the payload out of the log: the log holds a salted
	// commitment, the kernel the payload, encrypted under Subject's key
	// (the actor's id when empty), until the subject is erased. Naming a
	// Subject or a Salt asks it too. Salt is standard base64 of 32 bytes;
	// the client draws it for a signed request (testvectors/FORMATS.md,
	// "Sealed payloads").
	Seal    bool   `json:"seal,omitempty"`
	Subject string `json:"subject,omitempty"`
	Salt    string `json:"salt,omitempty"`
}

// EraseRequest is the body of POST /v1/subjects/{subject}/erase.
type EraseRequest struct {
	Reason string `json:"reason,omitempty"`
}

// Resources is what an action declares it uses.
type Resources struct {
	Network         []string `json:"network,omitempty"`
	FilesystemRead  []string `json:"fs_read,omitempty"`
	FilesystemWrite []string `json:"fs_write,omitempty"`
	Subprocess      bool     `json:"subprocess,omitempty"`
	Tools           uint64   `json:"tools,omitempty"`
}

// Receipt is the answer to a committed or held action. Status is
// "committed", or "held" (HTTP 202) when a hold rule matched: the event is
// then the hold request, and HoldID names the hold a human must answer.
type Receipt struct {
	Status   string `json:"status"`
	HoldID   string `json:"hold_id,omitempty"`
	EventID  string `json:"event_id"`
	Index    uint64 `json:"index"`
	LeafHash string `json:"leaf_hash"`
	Time     string `json:"time"`
	Actor    string `json:"actor"`
	Type     string `json:"type"`
	Target   string `json:"target"`
	Envelope string `json:"envelope,omitempty"`
	Cost     uint64 `json:"cost"`
	// Reason is the reason logged with the answer to a hold, in the answer
	// of POST /v1/holds/<id>/approve or /reject.
	Reason string `json:"reason,omitempty"`
	// Checkpoint (a signed note) and Proof (c2sp.org/tlog-proof text) are
	// present when the request asked for ?wait=published.
	Checkpoint string `json:"checkpoint,omitempty"`
	Proof      string `json:"proof,omitempty"`
	// ProofError says why a requested proof is missing; the action is
	// committed all the same.
	ProofError string `json:"proof_error,omitempty"`
	// TraceID is the W3C trace id the event records: the caller's, from
	// its traceparent header, or the trace annald began for the request
	// when it traces requests (annald serve --otlp-endpoint).
	TraceID string `json:"trace_id,omitempty"`
}

// Grant is one capability: a target pattern ("*" within one segment, "**"
// across segments) and the action types it allows ("*" for all four).
type Grant struct {
	Pattern string   `json:"pattern"`
	Actions []string `json:"actions"`
}

// AgentRequest is the body of POST /v1/agents: a human creates an agent
// (or root a human, with kind "human").
type AgentRequest struct {
	Kind    string  `json:"kind,omitempty"`
	Name    string  `json:"name"`
	Purpose string  `json:"purpose"`
	Expires string  `json:"expires,omitempty"`
	Grants  []Grant `json:"grants,omitempty"`
	// Energy moves from the creator's balance to the new actor.
	Energy uint64 `json:"energy,omitempty"`
	// Share of energy production moves from the creator's share.
	Share *uint64 `json:"share,omitempty"`
	// Trust (0.0–1.0) and Consensus give an agent its ring; without them
	// it starts in Ring 3, the sandbox.
	Trust     *float64 `json:"trust,omitempty"`
	Consensus bool     `json:"consensus,omitempty"`
	// SigningKey registers the actor's signing key at creation (a
	// signed-note Ed25519 verifier key, `annal keys generate`), and
	// RequireSigned makes its every request need a signature by it.
	SigningKey    string `json:"signing_key,omitempty"`
	RequireSigned bool   `json:"require_signed,omitempty"`
	// SealPayloads keeps the actor's payloads sealed beside the log.
	SealPayloads bool `json:"seal_payloads,omitempty"`
}

// SigningKeyRequest is the body of POST /v1/actors/{id}/key: Key becomes
// the actor's signing key (empty: revoked).
type SigningKeyRequest struct {
	Key           string `json:"key,omitempty"`
	RequireSigned bool   `json:"require_signed,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// SignatureHeader carries a request's signature: "key=<8 hex key ID>,
// nonce=<16–64 base64url>, time=<RFC 3339 UTC>, sig=<base64 Ed25519>" over
// the statement of kernel/event/signed.go (testvectors/FORMATS.md).
const SignatureHeader = "Annal-Signature"

// Agent is the answer to POST /v1/agents. The credential is shown once.
type Agent struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Purpose    string  `json:"purpose"`
	Creator    string  `json:"creator"`
	Expires    string  `json:"expires,omitempty"`
	Kind       string  `json:"kind"`
	Grants     []Grant `json:"grants,omitempty"`
	Energy     uint64  `json:"energy"`
	Credential string  `json:"credential"`
	Index      uint64  `json:"index"`
}

// Actor is the answer to GET /v1/actors/{id}.
type Actor struct {
	ID       string  `json:"id"`
	Kind     string  `json:"kind"`
	Name     string  `json:"name"`
	Purpose  string  `json:"purpose,omitempty"`
	Creator  string  `json:"creator,omitempty"`
	Expires  string  `json:"expires,omitempty"`
	Status   string  `json:"status"`
	Grants   []Grant `json:"grants,omitempty"`
	Share    uint64  `json:"share"`
	Balance  uint64  `json:"balance"`
	Reserved uint64  `json:"reserved"`
	Consumed uint64  `json:"consumed"`
	// SigningKey is the actor's signing key, if it registered one.
	SigningKey    string `json:"signing_key,omitempty"`
	RequireSigned bool   `json:"require_signed,omitempty"`
	SealPayloads  bool   `json:"seal_payloads,omitempty"`
}

// StatusRequest is the body of POST /v1/actors/{id}/status.
type StatusRequest struct {
	Status string `json:"status"` // active, frozen or terminated
	Reason string `json:"reason,omitempty"`
}

// EnvelopeRequest is the body of POST /v1/envelopes.
type EnvelopeRequest struct {
	Holder          string  `json:"holder"`
	Parent          string  `json:"parent,omitempty"`
	Budget          uint64  `json:"budget"`
	Grants          []Grant `json:"grants"`
	HoldOn          []Grant `json:"hold_on,omitempty"`
	HoldTimeoutSecs uint64  `json:"hold_timeout_secs,omitempty"`
	Expires         string  `json:"expires,omitempty"`
	// RequireSigned: actions under the envelope must be signed.
	RequireSigned bool `json:"require_signed,omitempty"`
	// SealPayloads: payloads of actions under it are kept sealed.
	SealPayloads bool `json:"seal_payloads,omitempty"`
}

// Envelope describes an envelope and its spending.
type Envelope struct {
	ID              string  `json:"id"`
	Holder          string  `json:"holder"`
	Issuer          string  `json:"issuer"`
	Parent          string  `json:"parent,omitempty"`
	Budget          uint64  `json:"budget"`
	Consumed        uint64  `json:"consumed"`
	Reserved        uint64  `json:"reserved"`
	Grants          []Grant `json:"grants"`
	HoldOn          []Grant `json:"hold_on,omitempty"`
	HoldTimeoutSecs uint64  `json:"hold_timeout_secs,omitempty"`
	Expires         string  `json:"expires,omitempty"`
	Revoked         bool    `json:"revoked"`
	Index           uint64  `json:"index"`
}

// Hold describes a held action.
type Hold struct {
	ID          string `json:"id"`
	Actor       string `json:"actor"`
	Envelope    string `json:"envelope"`
	Type        string `json:"type"`
	Target      string `json:"target"`
	Reserved    uint64 `json:"reserved"`
	Deadline    string `json:"deadline,omitempty"`
	Status      string `json:"status"`
	RequestedAt uint64 `json:"requested_at"`
	AnsweredBy  string `json:"answered_by,omitempty"`
	// AnsweredAt is the log index of the answer: for an approval, the
	// approved action's entry.
	AnsweredAt uint64 `json:"answered_at,omitempty"`
	Settled    uint64 `json:"settled"`
	// Reason is what the answer's event logged with it: the approver's or
	// rejecter's reason, a time-out's, or an approval's refused on
	// re-check.
	Reason string `json:"reason,omitempty"`
	// Session and Payload are the held action's, as it would be logged;
	// for a sealed payload, Payload is its plaintext while the kernel holds
	// it (the log holds the commitment) and SealedSubject names its subject.
	Session       string          `json:"session,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	SealedSubject string          `json:"sealed_subject,omitempty"`
	// RuleEnvelope and RulePattern name the hold rule that held the action
	// (the envelope whose hold_on grant matched, and its pattern); Remaining
	// is what the action's envelope has left. All three are as of now.
	RuleEnvelope string `json:"rule_envelope,omitempty"`
	RulePattern  string `json:"rule_pattern,omitempty"`
	Remaining    uint64 `json:"remaining"`
}

// MayEverRequest is the body of POST /v1/actions/may-ever: actions the
// caller asks about, at most MaxMayEver.
type MayEverRequest struct {
	Actions []ActionName `json:"actions"`
	// ObserveNeedsGrant asks whether observes are granted too (the kernel
	// logs an observe without a grant; a gate shows a read-only tool only to
	// an agent granted observe on it).
	ObserveNeedsGrant bool `json:"observe_needs_grant,omitempty"`
}

// ActionName is an action's type and target.
type ActionName struct {
	Type   string `json:"type"`
	Target string `json:"target"`
}

// MayEver answers one action of a MayEverRequest: whether the caller's
// writable targets and its own policies could ever allow it, and if not,
// the gate and reason.
type MayEver struct {
	Allowed bool   `json:"allowed"`
	Gate    string `json:"gate,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// MaxMayEver bounds the actions of one MayEverRequest.
const MaxMayEver = 4096

// HoldAnswer is the body of POST /v1/holds/{id}/approve and .../reject.
type HoldAnswer struct {
	Reason string `json:"reason,omitempty"`
}

// Limits on the governance bodies.
const (
	MaxEnvelopeBody = 64 << 10
	MaxSmallBody    = 4 << 10
)

// Info is the answer to GET /v1/info.
type Info struct {
	Origin         string `json:"origin"`
	VerifierKey    string `json:"verifier_key"`
	Size           uint64 `json:"size"`
	CheckpointSize uint64 `json:"checkpoint_size"`
	// Ready says whether the kernel takes writes; NotReady is why not.
	Ready    bool   `json:"ready"`
	NotReady string `json:"not_ready,omitempty"`
	// WitnessProblems says why witnesses of the kernel's policy refuse its
	// checkpoints (none is published meanwhile); empty when all cosign.
	WitnessProblems []string `json:"witness_problems,omitempty"`
}

// Readiness is the body of GET /v1/readyz (200 when ready, else 503) and
// GET /v1/healthz (200 while the process serves).
type Readiness struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	Error string `json:"error"`
	// Stage is the pipeline stage that denied an action, if one did, and
	// Gate the check within it.
	Stage string `json:"stage,omitempty"`
	Gate  string `json:"gate,omitempty"`
	// DenialIndex is the log index of the event that recorded the
	// refusal, if one did: an action.denied, or for an approval refused on
	// re-check the hold.answered that ended the hold.
	DenialIndex *uint64 `json:"denial_index,omitempty"`
	// Reason is the spec's name of a refusal where it has one, such as an
	// elevation's "insufficient_trust" (Execution Control §8.3).
	Reason string `json:"reason,omitempty"`
	// Signal is the signal the kernel sent the agent for this refusal:
	// "SIGKILL" when the action broke a policy that terminates the agent
	// that breaks it (seed 002's ExecutionResult.signal).
	Signal string `json:"signal,omitempty"`
	// TraceID is the W3C trace id of the request (its traceparent, or the
	// trace annald began for it): the denial recorded, if any, carries it
	// too (GET /v1/events?trace_id=).
	TraceID string `json:"trace_id,omitempty"`
	// OutcomeUnknown is set when a write failed after the entry reached
	// the log: it may be logged. Look it up before sending it again.
	OutcomeUnknown bool `json:"outcome_unknown,omitempty"`
	// Retryable is set when nothing was written and the same request sent
	// again is decided afresh: a 409 whose decision met a state that
	// changed before its entry could be written (with Retry-After), as
	// well as every 429 and 503 that is not OutcomeUnknown.
	Retryable bool `json:"retryable,omitempty"`
	// Stopped is set on a 503 from a kernel that takes no writes until an
	// operator acts (GET /v1/readyz says why): sending again will not help.
	Stopped bool `json:"stopped,omitempty"`
}

// HistoryItem is one event of GET /v1/events: its index, leaf hash and
// the event exactly as logged (canonical JSON; SHA-256(0x00 || event) is
// the leaf hash).
type HistoryItem struct {
	Index    uint64          `json:"index"`
	LeafHash string          `json:"leaf_hash"`
	Event    json.RawMessage `json:"event"`
	// SealedPayload is the payload the event's action carries sealed (its
	// commitment only), opened by the kernel; Erased says it is gone for
	// good, its subject erased.
	SealedPayload json.RawMessage `json:"sealed_payload,omitempty"`
	Erased        bool            `json:"erased,omitempty"`
}

// HistoryPage is the answer of GET /v1/events. NextCursor, when set, is the
// cursor parameter of the next page.
type HistoryPage struct {
	Events     []HistoryItem `json:"events"`
	NextCursor *uint64       `json:"next_cursor,omitempty"`
}

// SignInRequest is the body of POST /ui/session.
type SignInRequest struct {
	Credential string `json:"credential"`
}

// ConsoleSession answers POST and GET /ui/session: who is signed in, and
// the token every state-changing console request carries in X-CSRF-Token.
type ConsoleSession struct {
	Actor   Actor  `json:"actor"`
	CSRF    string `json:"csrf"`
	Expires string `json:"expires"`
}

// LogHealth is the answer to GET /v1/health.
type LogHealth struct {
	Origin         string `json:"origin"`
	VerifierKey    string `json:"verifier_key"`
	Size           uint64 `json:"size"`
	CheckpointSize uint64 `json:"checkpoint_size"`
	// CheckpointAgeSeconds is how long ago the checkpoint was last
	// published (-1 if none has been).
	CheckpointAgeSeconds float64 `json:"checkpoint_age_seconds"`
	Ready                bool    `json:"ready"`
	NotReady             string  `json:"not_ready,omitempty"`
	// Quorum is the witness policy's quorum line ("" without witnesses).
	Quorum    string          `json:"quorum,omitempty"`
	Witnesses []WitnessHealth `json:"witnesses"`
	// WitnessProblems is as in Info.
	WitnessProblems []string `json:"witness_problems,omitempty"`
}

// WitnessHealth is one witness of the kernel's witness policy.
type WitnessHealth struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	URL  string `json:"url,omitempty"`
	// LastCosignedSize and LastCosignedAt are from the newest cosignature
	// of this witness annald has seen on its published checkpoints since it
	// started (zero if none).
	LastCosignedSize uint64 `json:"last_cosigned_size"`
	LastCosignedAt   string `json:"last_cosigned_at,omitempty"`
	// Evidence lists the equivocation evidence about this log that the
	// witness publishes at <url>/evidence; EvidenceError says why it could
	// not be read.
	Evidence      []WitnessEvidence `json:"evidence"`
	EvidenceError string            `json:"evidence_error,omitempty"`
}

// WitnessEvidence is one proof, held by a witness, that the log showed two
// different trees.
type WitnessEvidence struct {
	ID      string    `json:"id"`
	Sizes   [2]uint64 `json:"sizes"`
	Source  string    `json:"source"`
	FoundAt string    `json:"found_at"`
	URL     string    `json:"url"`
}

// Blob answers POST /v1/blobs: the stored bytes' OID and size.
type Blob struct {
	OID  string `json:"oid"`
	Size int64  `json:"size"`
}

// MaxVFSContent bounds the body of PUT /v1/vfs/{agent}/{path}: what one
// write to an agent's file tree stores.
const MaxVFSContent = 1 << 20

// VFSFile is one file of an agent's tree (seed 002, Virtual File System):
// its path relative to the tree, the OID of its content, and the write
// that made it.
type VFSFile struct {
	Path   string `json:"path"`
	OID    string `json:"oid"`
	Index  uint64 `json:"index"`
	Writer string `json:"writer"`
	Time   string `json:"time"`
}

// VFSListing answers GET /v1/vfs/{agent}/{dir}: the files at or under a
// directory of the tree, by path, folded from the log. Resumed is the
// index of the resume that last emptied mem/working (0: none).
type VFSListing struct {
	URI     string    `json:"uri"`
	Files   []VFSFile `json:"files"`
	Resumed uint64    `json:"resumed,omitempty"`
}

// VFSWritten answers PUT /v1/vfs/{agent}/{path}: the file written, its
// content's OID and size, and the receipt of the write's action.
type VFSWritten struct {
	URI     string  `json:"uri"`
	OID     string  `json:"oid"`
	Size    int64   `json:"size"`
	Receipt Receipt `json:"receipt"`
}
