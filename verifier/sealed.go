package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Sealed payloads (testvectors/FORMATS.md, "Sealed payloads"), checked
// with this package's own code: an action may carry, in place of its
// payload, {"subject", "commitment"}, the commitment being
// "sha256:" || hex(SHA-256("annal/sealed-payload/v1\n" || salt || payload)).
// A bundle opens it by carrying the payload and the salt on the event's
// line; the verifier checks that they open the commitment. A sealed payload
// a bundle does not open (its subject erased, or withheld) is counted, and
// its event verified like any other: every hash covers the commitment.

// CheckSealed is the check of a sealed payload a bundle opens.
const CheckSealed Check = "sealed payload"

// MaxSealedPayload bounds an opened payload.
const MaxSealedPayload = 32 << 10

const sealContext = "annal/sealed-payload/v1\n"

var (
	sealSubjectPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	sealCommitmentPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// Sealed counts a bundle's sealed payloads.
type Sealed struct {
	// Opened payloads were carried and matched their commitments.
	Opened uint64 `json:"opened"`
	// Closed payloads were not carried: only their commitment is in the
	// bundle (an erased subject, or a payload the exporter withheld).
	Closed uint64 `json:"closed"`
	// Subjects counts the sealed payloads per subject.
	Subjects map[string]uint64 `json:"subjects,omitempty"`
}

type sealedFacts struct {
	subject, commitment string
}

// opening is the "opened" member of an event line, decoded.
type opening struct {
	payload, salt []byte
}

// readSealed returns the sealed payload an action entry, or a delta entry
// for its changes, carries, or nil.
func readSealed(kind string, entry []byte) (*sealedFacts, error) {
	if !bytes.Contains(entry, []byte(`"sealed":{`)) {
		return nil, nil
	}
	type commitment struct {
		Subject    string `json:"subject"`
		Commitment string `json:"commitment"`
	}
	var e struct {
		Action *struct {
			Payload     json.RawMessage `json:"payload"`
			PayloadHash *string         `json:"payload_hash"`
			Sealed      *commitment     `json:"sealed"`
		} `json:"action"`
		// A delta's changes kept for a time only (§14.7) are sealed too
		// (deltachain.go checks the member's form).
		Delta *struct {
			Sealed *commitment `json:"sealed"`
		} `json:"delta"`
	}
	if err := json.Unmarshal(entry, &e); err != nil {
		return nil, err
	}
	var s *commitment
	switch {
	case e.Delta != nil && e.Delta.Sealed != nil && kind == DeltaKind:
		s = e.Delta.Sealed
	case e.Action == nil || e.Action.Sealed == nil:
		return nil, nil
	case !isActionKind(kind):
		return nil, fmt.Errorf("a %s event carries a sealed payload", kind)
	case e.Action.Payload != nil || e.Action.PayloadHash != nil:
		return nil, errors.New("the action carries a sealed payload and a payload or payload_hash")
	default:
		s = e.Action.Sealed
	}
	switch {
	case !sealSubjectPattern.MatchString(s.Subject):
		return nil, fmt.Errorf("sealed payload subject %q is malformed", s.Subject)
	case !sealCommitmentPattern.MatchString(s.Commitment):
		return nil, fmt.Errorf("sealed payload commitment %q is malformed", s.Commitment)
	}
	return &sealedFacts{subject: s.Subject, commitment: s.Commitment}, nil
}

// sealCommitment is the commitment to payload under salt.
func sealCommitment(salt, payload []byte) string {
	h := sha256.New()
	h.Write([]byte(sealContext))
	h.Write(salt)
	h.Write(payload)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// checkOpening checks an opened payload against the entry's commitment.
func checkOpening(s *sealedFacts, o *opening) error {
	switch {
	case s == nil:
		return errors.New("the line opens a sealed payload, but the entry seals none")
	case len(o.salt) != 32:
		return fmt.Errorf("the salt is %d bytes, not 32", len(o.salt))
	case len(o.payload) > MaxSealedPayload:
		return fmt.Errorf("the payload is %d bytes, more than %d", len(o.payload), MaxSealedPayload)
	case !utf8.Valid(o.payload):
		return errors.New("the payload is not UTF-8")
	}
	canonical, err := jcs.Transform(o.payload)
	if err != nil || !bytes.Equal(canonical, o.payload) {
		return errors.New("the payload is not canonical JSON (RFC 8785)")
	}
	if sealCommitment(o.salt, o.payload) != s.commitment {
		return fmt.Errorf("the payload and salt do not open the commitment %s", s.commitment)
	}
	return nil
}

// SealedCommitment is the commitment an action carries for payload (its
// RFC 8785 bytes) under salt, for tools that check an opening by hand.
func SealedCommitment(salt, payload []byte) string { return sealCommitment(salt, payload) }

// parseOpened reads `"opened":{"payload":"<b64>","salt":"<b64>"}` less its
// lead-in, returning the rest of the line.
func parseOpened(rest []byte) (*opening, []byte, error) {
	payload, rest, err := quotedBase64(rest, "payload")
	if err != nil {
		return nil, nil, err
	}
	if !bytes.HasPrefix(rest, eventLineSalt) {
		return nil, nil, fmt.Errorf("after the opened payload comes %s", eventLineSalt)
	}
	salt, rest, err := quotedBase64(rest[len(eventLineSalt):], "salt")
	if err != nil {
		return nil, nil, err
	}
	if !bytes.HasPrefix(rest, eventLineOpenedEnd) {
		return nil, nil, errors.New("the opened member does not end after its salt")
	}
	return &opening{payload: payload, salt: salt}, rest[len(eventLineOpenedEnd):], nil
}

// quotedBase64 decodes base64 up to the next '"' (the opening quote is
// already read).
func quotedBase64(rest []byte, what string) ([]byte, []byte, error) {
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil, nil, fmt.Errorf("the opened %s does not end", what)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(string(rest[:end]))
	if err != nil || len(b) == 0 {
		return nil, nil, fmt.Errorf("the opened %s is not canonical base64", what)
	}
	return b, rest[end:], nil
}

func (s *Sealed) count(subject string, opened bool) {
	if opened {
		s.Opened++
	} else {
		s.Closed++
	}
	if s.Subjects == nil {
		s.Subjects = map[string]uint64{}
	}
	s.Subjects[subject]++
}
