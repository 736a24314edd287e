// Package event defines Annal's log entry: one event per entry, encoded as
// versioned canonical JSON (RFC 8785, JCS). The encoding is the contract
// between the kernel, the offline verifier and auditors, and is written down
// with known answers in testvectors/.
//
// Every field is part of the entry bytes, so the RFC 6962 leaf hash,
// SHA-256(0x00 || entry), covers all of it: the event id, time, actor, kind,
// the action (type, target, payload or payload hash) and the decision the
// pipeline made. An entry is at most MaxEntrySize bytes; larger payloads
// travel as a "sha256:<hex>" content hash instead of inline.
//
// Parse is strict: it accepts exactly the bytes Encode produces and nothing
// else, so an entry has one meaning and one encoding.
package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/annal-dev/annal/kernel/delta"
	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Version is the event encoding version written in every event's "v" field.
const Version = 1

// MaxEntrySize is the largest log entry: the 16-bit length prefix of a
// c2sp.org/tlog-tiles entry bundle.
const MaxEntrySize = 65535

// Kind says what an event records.
type Kind string

// The kinds of event.
const (
	// KindGenesis is entry 0 of every log: the log's origin and its root human.
	KindGenesis Kind = "log.genesis"
	// KindActorCreated records a new actor and the hash of its credential.
	KindActorCreated Kind = "actor.created"
	// KindAction records an action that passed the pipeline.
	KindAction Kind = "action"
	// KindRulesAdopted records the kernel adopting a newer rules version
	// for a log written under an older one (LogInfo.Rules).
	KindRulesAdopted Kind = "log.rules"
)

// ActionType is one of the four action types of the paper (§4.2).
type ActionType string

// The action types.
const (
	Observe ActionType = "observe"
	Create  ActionType = "create"
	Mutate  ActionType = "mutate"
	Execute ActionType = "execute"
)

// Valid reports whether t is one of the four action types.
func (t ActionType) Valid() bool {
	switch t {
	case Observe, Create, Mutate, Execute:
		return true
	}
	return false
}

// ActorKind separates humans from agents (Def. 4.2).
type ActorKind string

// The actor kinds.
const (
	Human ActorKind = "human"
	Agent ActorKind = "agent"
)

// Event is one log entry. Exactly the fields its Kind calls for are set.
type Event struct {
	V     int     `json:"v"`
	ID    string  `json:"id"`
	Time  Instant `json:"time"`
	Kind  Kind    `json:"kind"`
	Actor string  `json:"actor"`
	// Session names the session a session-scoped event belongs to
	// (Execution Control §10), so that a session's events can be selected
	// from the log without knowing every kind.
	Session string `json:"session,omitempty"`

	Log         *LogInfo      `json:"log,omitempty"`
	Subject     *ActorRecord  `json:"subject,omitempty"`
	Action      *Action       `json:"action,omitempty"`
	Decision    *Decision     `json:"decision,omitempty"`
	Status      *StatusChange `json:"status,omitempty"`
	Envelope    *Envelope     `json:"envelope,omitempty"`
	EnvelopeEnd *EnvelopeEnd  `json:"envelope_end,omitempty"`
	Production  *Production   `json:"production,omitempty"`
	Denial      *Denial       `json:"denial,omitempty"`
	Hold        *Hold         `json:"hold,omitempty"`
	Delta       *delta.Delta  `json:"delta,omitempty"`

	// Execution control parts (control.go).
	Ring             *RingAssignment         `json:"ring,omitempty"`
	RingConfig       *RingConfig             `json:"ring_config,omitempty"`
	Descriptor       *DescriptorRegistration `json:"descriptor,omitempty"`
	Elevation        *Elevation              `json:"elevation,omitempty"`
	ElevationEnd     *ElevationEnd           `json:"elevation_end,omitempty"`
	SessionRecord    *SessionRecord          `json:"session_record,omitempty"`
	SessionChange    *SessionChange          `json:"session_change,omitempty"`
	Quarantine       *Quarantine             `json:"quarantine,omitempty"`
	Kill             *Kill                   `json:"kill,omitempty"`
	Saga             *SagaRecord             `json:"saga,omitempty"`
	SagaStep         *SagaStep               `json:"saga_step,omitempty"`
	Policy           *PolicyRecord           `json:"policy,omitempty"`
	PolicyAttachment *PolicyAttachment       `json:"policy_attachment,omitempty"`
	Signal           *SignalRecord           `json:"signal,omitempty"`
	SignalMask       *SignalMask             `json:"signal_mask,omitempty"`

	// KeyChange is carried by actor.key (signed.go).
	KeyChange *KeyChange `json:"key_change,omitempty"`
	// Signed is the signature of the request the event records, on any
	// kind but the kernel's own (signed.go).
	Signed *Signed `json:"signed,omitempty"`
	// Erasure is carried by subject.erased (sealed.go).
	Erasure *Erasure `json:"erasure,omitempty"`
}

// LogInfo is carried by the genesis event.
type LogInfo struct {
	Origin   string `json:"origin"`
	Software string `json:"software"`
	// Energy is the energy model of the log; absent means DefaultEnergy.
	Energy *EnergyConfig `json:"energy,omitempty"`
	// Rules is the version of the rules the log is written under; absent
	// means 1, the rules of the first releases (kernel/internal/ledger).
	Rules int `json:"rules,omitempty"`
}

// ActorRecord describes an actor at creation.
type ActorRecord struct {
	ID      string    `json:"id"`
	Kind    ActorKind `json:"kind"`
	Name    string    `json:"name"`
	Purpose string    `json:"purpose,omitempty"`
	Creator string    `json:"creator,omitempty"`
	Expires Instant   `json:"expires,omitzero"`
	// CredentialSHA256 is the hex SHA-256 of the actor's bearer credential.
	// The credential is 256 random bits, so its hash reveals nothing.
	CredentialSHA256 string `json:"credential_sha256"`
	// Grants are the actor's writable targets W(p) (Def. 4.11), declared at
	// creation.
	Grants []Grant `json:"grants,omitempty"`
	// Share is the actor's share of energy production (Def. 4.16).
	Share uint64 `json:"share,omitempty"`
	// Energy is what the creator gave the new actor from its own balance.
	Energy uint64 `json:"energy,omitempty"`
	// SigningKey is the actor's signing key from creation (KeyChange).
	SigningKey string `json:"signing_key,omitempty"`
	// RequireSigned: the actor's requests must be signed.
	RequireSigned bool `json:"require_signed,omitempty"`
	// SealPayloads: the actor's action payloads are sealed (sealed.go).
	SealPayloads bool `json:"seal_payloads,omitempty"`
}

// Action is what an actor asked the kernel to record.
type Action struct {
	Type   ActionType `json:"type"`
	Target string     `json:"target"`
	// Payload is the caller's JSON, canonicalised. At most one of Payload
	// and PayloadHash is set.
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadHash is "sha256:<64 hex>" for a payload kept outside the log.
	PayloadHash string `json:"payload_hash,omitempty"`
	// Sealed is set instead of Payload for a payload kept sealed beside
	// the log (sealed.go).
	Sealed *SealedPayload `json:"sealed,omitempty"`
	// Envelope is the envelope an agent acted under (Def. 4.13).
	Envelope string `json:"envelope,omitempty"`
	// Resources is what the action declared it uses (Execution Control §7).
	Resources *Resources `json:"resources,omitempty"`
}

// Decision is what the pipeline decided, in energy units.
type Decision struct {
	Outcome  string `json:"outcome"`
	Cost     uint64 `json:"cost"`
	Reserved uint64 `json:"reserved"`
	Settled  uint64 `json:"settled"`
}

// OutcomeCommitted is the outcome of an action that passed every stage.
const OutcomeCommitted = "committed"

var (
	uuidPattern    = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	actorIDPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	hexHashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	oidPattern     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// FormatTime renders t as events carry it: RFC 3339, UTC, nanoseconds
// without trailing zeros.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ValidActorID reports whether id can name an actor: lower-case letters,
// digits and '-', starting with a letter, at most 64 bytes.
func ValidActorID(id string) bool { return actorIDPattern.MatchString(id) }

// ValidOID reports whether s is a content id "sha256:<64 lower-case hex>".
func ValidOID(s string) bool { return oidPattern.MatchString(s) }

// Encode returns the canonical entry bytes of e after checking it.
func Encode(e *Event) ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", e.ID, err)
	}
	entry, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("event %s: canonical JSON: %w", e.ID, err)
	}
	if len(entry) > MaxEntrySize {
		return nil, &TooLargeError{Size: len(entry)}
	}
	return entry, nil
}

// TooLargeError reports an event whose encoding exceeds MaxEntrySize.
type TooLargeError struct{ Size int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("event is %d bytes encoded, more than a log entry's limit of %d; send the payload as payload_hash \"sha256:<hex>\" and keep its bytes elsewhere", e.Size, MaxEntrySize)
}

// Parse decodes a log entry. It accepts only what Encode would produce for
// the same event: valid fields, no unknown members, canonical bytes.
func Parse(entry []byte) (*Event, error) {
	if len(entry) > MaxEntrySize {
		return nil, &TooLargeError{Size: len(entry)}
	}
	// The payload sits two levels down (event, action) and may itself nest
	// MaxJSONDepth deep.
	if err := checkJSON(entry, MaxJSONDepth+2); err != nil {
		return nil, fmt.Errorf("entry: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(entry))
	dec.DisallowUnknownFields()
	var e Event
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("entry is not an event: %w", err)
	}
	again, err := Encode(&e)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, entry) {
		return nil, errors.New("entry is not in canonical form (RFC 8785)")
	}
	return &e, nil
}

// LeafHash is the RFC 6962 leaf hash of an entry: SHA-256(0x00 || entry).
func LeafHash(entry []byte) [sha256.Size]byte {
	return [sha256.Size]byte(rfc6962.DefaultHasher.HashLeaf(entry))
}

// CredentialHash is the hex SHA-256 of a bearer credential, as events and
// kernel state keep it.
func CredentialHash(credential string) string {
	h := sha256.Sum256([]byte(credential))
	return hex.EncodeToString(h[:])
}
