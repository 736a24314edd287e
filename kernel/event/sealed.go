package event

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/gowebpki/jcs"
)

// Sealed payloads (testvectors/FORMATS.md, "Sealed payloads"). An actor or
// envelope may ask that action payloads be kept out of the log: the event
// then carries, instead of the payload, the data subject it belongs to and
// a salted commitment
//
//	"sha256:" || hex(SHA-256("annal/sealed-payload/v1\n" || salt || payload))
//
// where salt is 32 random bytes and payload the RFC 8785 bytes of the
// payload. The kernel keeps the payload and its salt beside the log,
// encrypted under a key of the subject's own; a subject.erased event
// destroys that key, after which the payload and the salt are gone and the
// commitment, salted with 256 unknown bits, says nothing about them. Every
// hash of the log covers the commitment, not the payload, so every proof
// stays valid.
//
// Only payloads the rules do not read may be sealed: observe, create and
// mutate, whose cost is their type's. An execute payload is the command the
// rules cost and the intent a result names, and stays in the log.

// KindSubjectErased records a human erasing a data subject's sealed
// payloads: the subject's key is destroyed once the event is durable, and
// nothing more may be sealed under the subject.
const KindSubjectErased Kind = "subject.erased"

// SealContext starts the bytes a sealed payload's commitment hashes.
const SealContext = "annal/sealed-payload/v1\n"

// SaltSize is the size of a sealed payload's salt in bytes.
const SaltSize = 32

// MaxSealedPayload bounds a sealed payload: it is not in the entry, so the
// entry's 64 KiB limit does not apply, but it travels in one request and in
// one line of a bundle (with the entry, under its 128 KiB).
const MaxSealedPayload = 32 << 10

// SealedPayload is carried by an action in place of its payload.
type SealedPayload struct {
	// Subject is the data subject the payload is about: a pseudonymous
	// identifier chosen by the caller (never personal data itself: it stays
	// in the log after erasure).
	Subject string `json:"subject"`
	// Commitment is "sha256:<hex>" of SealContext || salt || payload.
	Commitment string `json:"commitment"`
}

// Erasure is carried by subject.erased.
type Erasure struct {
	Subject string `json:"subject"`
	Reason  string `json:"reason,omitempty"`
}

var subjectPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// ValidSubject reports whether s can name a data subject: 1 to 128
// characters of letters, digits, '.', '_', ':' and '-', starting with a
// letter or digit.
func ValidSubject(s string) bool { return subjectPattern.MatchString(s) }

// SealCommitment is the commitment to payload (its RFC 8785 bytes) under
// salt.
func SealCommitment(salt, payload []byte) string {
	h := sha256.New()
	h.Write([]byte(SealContext))
	h.Write(salt)
	h.Write(payload)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Opens reports whether salt and payload open the commitment.
func (s *SealedPayload) Opens(salt, payload []byte) bool {
	return len(salt) == SaltSize && SealCommitment(salt, payload) == s.Commitment
}

func (s *SealedPayload) validate() error {
	if !ValidSubject(s.Subject) {
		return fmt.Errorf("sealed payload: subject %q is not 1-128 of [A-Za-z0-9._:-] starting with a letter or digit", s.Subject)
	}
	if !ValidOID(s.Commitment) {
		return fmt.Errorf("sealed payload: commitment %q is not \"sha256:<64 lower-case hex>\"", s.Commitment)
	}
	return nil
}

// checkSealed checks an action's sealed payload: in place of the payload,
// and never on an execute.
func (a *Action) checkSealed() error {
	switch {
	case a.Payload != nil || a.PayloadHash != "":
		return fmt.Errorf("action on %q carries a sealed payload and a payload or payload_hash; a sealed payload is in place of them", a.Target)
	case a.Type == Execute:
		return fmt.Errorf("action on %q: an execute payload is read by the rules and cannot be sealed", a.Target)
	}
	if err := a.Sealed.validate(); err != nil {
		return fmt.Errorf("action on %q: %w", a.Target, err)
	}
	return nil
}

func (e *Erasure) check(*Event) error {
	if !ValidSubject(e.Subject) {
		return fmt.Errorf("erasure of %q, not a valid subject", e.Subject)
	}
	return validateText("erasure reason", e.Reason, 1024)
}

// SealedRequestBody is the body of an action request as a signature
// covers it: for a request that seals its payload with a salt of its own
// ("salt", with "subject" and "payload"), the members payload, salt, seal
// and subject are replaced by "sealed": {"commitment", "subject"}, what the
// event will carry; any other body is returned as it is. So the signer
// commits to the payload without the log ever holding it, and the
// signature stays verifiable after the payload is erased. body is
// canonical JSON; so is the result.
func SealedRequestBody(body []byte) ([]byte, error) {
	if !bytes.Contains(body, []byte(`"salt":`)) && !bytes.Contains(body, []byte(`"seal":`)) && !bytes.Contains(body, []byte(`"subject":`)) {
		return body, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return body, nil // not an object: the action's own form refuses it
	}
	_, hasSalt := m["salt"]
	_, hasSeal := m["seal"]
	_, hasSubject := m["subject"]
	if !hasSalt && !hasSeal && !hasSubject {
		return body, nil
	}
	sealed, err := sealedMember(m)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"payload", "salt", "seal", "subject"} {
		delete(m, k)
	}
	m["sealed"] = sealed
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// sealedMember is the "sealed" member that stands, in a signed request,
// for the payload, subject and salt members of a request that seals its
// payload.
func sealedMember(m map[string]json.RawMessage) (json.RawMessage, error) {
	rawSalt, hasSalt := m["salt"]
	rawSubject, hasSubject := m["subject"]
	var salt []byte
	var subject string
	if !hasSalt || !hasSubject || json.Unmarshal(rawSalt, &salt) != nil || len(salt) != SaltSize ||
		json.Unmarshal(rawSubject, &subject) != nil || m["payload"] == nil {
		return nil, errors.New("a signed request that seals its payload carries the payload, its subject and its salt (standard base64 of 32 bytes)")
	}
	return json.Marshal(SealedPayload{Subject: subject, Commitment: SealCommitment(salt, m["payload"])})
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindSubjectErased] = carries(must("erasure"), may("session")) // a delta's changes: its session (retention)
}
