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
	"sync"
	"time"

	"github.com/annal-dev/annal/internal/strictjson"
	"github.com/annal-dev/annal/kernel/delta"
	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Version is the event encoding version written in every event's "v" field.
const Version = 1

// MaxEntrySize is the largest log entry: the 16-bit length prefix of a
// c2sp.org/tlog-tiles entry bundle.
const MaxEntrySize = 65535

// Kind says what an event records. Each kind is declared in the file of
// its concept, with the types of the parts it carries; kinds (parts.go)
// says which parts those are.
type Kind string

// Event is one log entry. Exactly the fields its Kind calls for are set:
// every pointer field but Signed, and Session, is a part that only some
// kinds carry (parts.go), its type declared in the file of its concept.
// Its fields, like those of Action and Decision, are listed in member order
// (RFC 8785 sorts members by name), so that the encoding of the common
// kinds is canonical as json writes it (Encode).
type Event struct {
	Action       *Action                 `json:"action,omitempty"`
	Actor        string                  `json:"actor"`
	Decision     *Decision               `json:"decision,omitempty"`
	Delta        *delta.Delta            `json:"delta,omitempty"`
	Denial       *Denial                 `json:"denial,omitempty"`
	Descriptor   *DescriptorRegistration `json:"descriptor,omitempty"`
	Elevation    *Elevation              `json:"elevation,omitempty"`
	ElevationEnd *ElevationEnd           `json:"elevation_end,omitempty"`
	Envelope     *Envelope               `json:"envelope,omitempty"`
	EnvelopeEnd  *EnvelopeEnd            `json:"envelope_end,omitempty"`
	// Erasure is carried by subject.erased (sealed.go).
	Erasure *Erasure `json:"erasure,omitempty"`
	Hold    *Hold    `json:"hold,omitempty"`
	ID      string   `json:"id"`
	// KeyChange is carried by actor.key (signed.go).
	KeyChange        *KeyChange        `json:"key_change,omitempty"`
	Kill             *Kill             `json:"kill,omitempty"`
	Kind             Kind              `json:"kind"`
	Log              *LogInfo          `json:"log,omitempty"`
	Policy           *PolicyRecord     `json:"policy,omitempty"`
	PolicyAttachment *PolicyAttachment `json:"policy_attachment,omitempty"`
	Production       *Production       `json:"production,omitempty"`
	Quarantine       *Quarantine       `json:"quarantine,omitempty"`
	Ring             *RingAssignment   `json:"ring,omitempty"`
	RingConfig       *RingConfig       `json:"ring_config,omitempty"`
	Saga             *SagaRecord       `json:"saga,omitempty"`
	SagaStep         *SagaStep         `json:"saga_step,omitempty"`
	// Session names the session a session-scoped event belongs to
	// (Execution Control §10), so that a session's events can be selected
	// from the log without knowing every kind.
	Session       string         `json:"session,omitempty"`
	SessionChange *SessionChange `json:"session_change,omitempty"`
	SessionRecord *SessionRecord `json:"session_record,omitempty"`
	Signal        *SignalRecord  `json:"signal,omitempty"`
	SignalMask    *SignalMask    `json:"signal_mask,omitempty"`
	// Signed is the signature of the request the event records, on any
	// kind but the kernel's own (signed.go).
	Signed  *Signed       `json:"signed,omitempty"`
	Status  *StatusChange `json:"status,omitempty"`
	Subject *ActorRecord  `json:"subject,omitempty"`
	Time    Instant       `json:"time"`
	// Toleration is carried by log.tolerated (tolerated.go).
	Toleration *Toleration `json:"toleration,omitempty"`
	// TraceID is the W3C trace id of the request the event records, on
	// any kind (trace.go).
	TraceID string `json:"trace_id,omitempty"`
	V       int    `json:"v"`
}

// parts are every part an event may carry, in the order a part that is
// missing or not allowed is reported. The functions are written out, not
// made by a generic helper: Encode and Parse call them all for every
// event, and a closure over a field accessor made validation some 6%
// costlier.
var parts = [...]part{
	{"log", func(e *Event) bool { return e.Log != nil }, func(e *Event) error { return e.Log.check(e) }},
	{"subject", func(e *Event) bool { return e.Subject != nil }, func(e *Event) error { return e.Subject.check(e) }},
	{"action", func(e *Event) bool { return e.Action != nil }, func(e *Event) error { return e.Action.check(e) }},
	{"decision", func(e *Event) bool { return e.Decision != nil }, func(e *Event) error { return e.Decision.check(e) }},
	{"status", func(e *Event) bool { return e.Status != nil }, func(e *Event) error { return e.Status.check(e) }},
	{"envelope", func(e *Event) bool { return e.Envelope != nil }, func(e *Event) error { return e.Envelope.check(e) }},
	{"envelope_end", func(e *Event) bool { return e.EnvelopeEnd != nil }, func(e *Event) error { return e.EnvelopeEnd.check(e) }},
	{"production", func(e *Event) bool { return e.Production != nil }, func(e *Event) error { return e.Production.check(e) }},
	{"denial", func(e *Event) bool { return e.Denial != nil }, func(e *Event) error { return e.Denial.check(e) }},
	{"hold", func(e *Event) bool { return e.Hold != nil }, func(e *Event) error { return e.Hold.check(e) }},
	{name: "delta", carried: func(e *Event) bool { return e.Delta != nil }, check: checkDelta},
	{"ring", func(e *Event) bool { return e.Ring != nil }, func(e *Event) error { return e.Ring.check(e) }},
	{"ring_config", func(e *Event) bool { return e.RingConfig != nil }, func(e *Event) error { return e.RingConfig.check(e) }},
	{"descriptor", func(e *Event) bool { return e.Descriptor != nil }, func(e *Event) error { return e.Descriptor.check(e) }},
	{"elevation", func(e *Event) bool { return e.Elevation != nil }, func(e *Event) error { return e.Elevation.check(e) }},
	{"elevation_end", func(e *Event) bool { return e.ElevationEnd != nil }, func(e *Event) error { return e.ElevationEnd.check(e) }},
	{"session_record", func(e *Event) bool { return e.SessionRecord != nil }, func(e *Event) error { return e.SessionRecord.check(e) }},
	{"session_change", func(e *Event) bool { return e.SessionChange != nil }, func(e *Event) error { return e.SessionChange.check(e) }},
	{"quarantine", func(e *Event) bool { return e.Quarantine != nil }, func(e *Event) error { return e.Quarantine.check(e) }},
	{"kill", func(e *Event) bool { return e.Kill != nil }, func(e *Event) error { return e.Kill.check(e) }},
	{"saga", func(e *Event) bool { return e.Saga != nil }, func(e *Event) error { return e.Saga.check(e) }},
	{"saga_step", func(e *Event) bool { return e.SagaStep != nil }, func(e *Event) error { return e.SagaStep.check(e) }},
	{"policy", func(e *Event) bool { return e.Policy != nil }, func(e *Event) error { return e.Policy.check(e) }},
	{"policy_attachment", func(e *Event) bool { return e.PolicyAttachment != nil }, func(e *Event) error { return e.PolicyAttachment.check(e) }},
	{"signal", func(e *Event) bool { return e.Signal != nil }, func(e *Event) error { return e.Signal.check(e) }},
	{"signal_mask", func(e *Event) bool { return e.SignalMask != nil }, func(e *Event) error { return e.SignalMask.check(e) }},
	{"key_change", func(e *Event) bool { return e.KeyChange != nil }, func(e *Event) error { return e.KeyChange.check(e) }},
	{"erasure", func(e *Event) bool { return e.Erasure != nil }, func(e *Event) error { return e.Erasure.check(e) }},
	{"toleration", func(e *Event) bool { return e.Toleration != nil }, func(e *Event) error { return e.Toleration.check(e) }},
	{name: "session", carried: func(e *Event) bool { return e.Session != "" }, check: checkSessionName},
}

var oidPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// FormatTime renders t as events carry it: RFC 3339, UTC, nanoseconds
// without trailing zeros.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// validUUID reports whether s is a UUID in lower-case hex, 8-4-4-4-12.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// ValidOID reports whether s is a content id "sha256:<64 lower-case hex>".
func ValidOID(s string) bool { return oidPattern.MatchString(s) }

// Encode returns the canonical entry bytes of e after checking it.
func Encode(e *Event) ([]byte, error) { return encodeTo(make([]byte, 0, 512), e) }

// encodeTo is Encode, appending an action to dst (Parse encodes each entry
// again only to compare, into a buffer it can reuse).
func encodeTo(dst []byte, e *Event) ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	entry, ok := appendAction(dst, e)
	if !ok {
		var err error
		if entry, err = encodeGeneral(e); err != nil {
			return nil, err
		}
	}
	if len(entry) > MaxEntrySize {
		return nil, &TooLargeError{Size: len(entry)}
	}
	return entry, nil
}

// encodeGeneral encodes a validated event of any kind: encoding/json, then
// the RFC 8785 transform unless the output is canonical as it is.
func encodeGeneral(e *Event) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(512)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // RFC 8785 writes <, > and & as they are
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("event %s: %w", e.ID, err)
	}
	raw := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	// The structs of the common kinds list their fields in member order,
	// so their encoding is canonical as it is; anything else goes through
	// the full RFC 8785 transform.
	if isCanonical(raw) {
		return raw, nil
	}
	entry, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("event %s: canonical JSON: %w", e.ID, err)
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
	e, ok := parseAction(entry)
	if !ok {
		// Exact member names (strictjson): the canonical form below would
		// refuse a member in another case anyway, and this decoder reads
		// an entry some three times faster than encoding/json's.
		e = &Event{}
		if err := strictjson.DecodeChecked(entry, e); err != nil {
			return nil, fmt.Errorf("entry is not an event: %w", err)
		}
	}
	var buf [512]byte
	again, err := encodeTo(buf[:0], e)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, entry) {
		return nil, errors.New("entry is not in canonical form (RFC 8785)")
	}
	return e, nil
}

// LeafHash is the RFC 6962 leaf hash of an entry: SHA-256(0x00 || entry).
// It sums the two in a pooled buffer rather than through a digest made
// for each entry, as rfc6962.DefaultHasher does: the kernel hashes every
// entry it writes, rebuilds and audits.
func LeafHash(entry []byte) [sha256.Size]byte {
	buf := leafInputs.Get().(*[]byte)
	in := append(append((*buf)[:0], rfc6962.RFC6962LeafHashPrefix), entry...)
	sum := sha256.Sum256(in)
	if cap(in) <= maxPooledLeafInput {
		*buf = in
		leafInputs.Put(buf)
	}
	return sum
}

// leafInputs are LeafHash's buffers; one longer than maxPooledLeafInput
// (an entry near the largest) is let go rather than kept.
var leafInputs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledLeafInput = 8 << 10

// CredentialHash is the hex SHA-256 of a bearer credential, as events and
// kernel state keep it.
func CredentialHash(credential string) string {
	return HashHex(sha256.Sum256([]byte(credential)))
}

// HashHex is h in lower-case hex, as hex.EncodeToString gives it, in one
// allocation rather than two: it is made for every request (a
// credential's hash) and every receipt (its leaf hash).
func HashHex(h [sha256.Size]byte) string {
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], h[:])
	return string(buf[:])
}
