package delta

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Retention (Execution Control §14.7: deltas 180 days, hashes permanent).
// A delta whose changes are kept for a time only carries, in the log, Sealed
// in place of Changes: a salted commitment to the changes (the RFC 8785
// bytes of the changes array), the data subject "delta:<delta_id>" whose
// key encrypts them beside the log, and retain_until, when the kernel
// erases that subject. delta_hash covers the delta as logged, commitment
// included, so the chain and every hash of the log verify from the log
// alone, before and after the changes are gone. While they are kept, the
// kernel opens the delta: the same Delta with Changes set beside Sealed.

// DefaultRetention is how long a delta's changes are kept (§14.7).
const DefaultRetention = 180 * 24 * time.Hour

// SubjectPrefix starts the data subject of a delta's changes.
const SubjectPrefix = "delta:"

// ErrErased is wrapped when a delta's changes are needed but were erased.
var ErrErased = errors.New("the delta's changes were erased")

// Sealed stands in a logged delta for its changes.
type Sealed struct {
	Subject    string `json:"subject"`
	Commitment string `json:"commitment"`
	// RetainUntil is when the changes are erased: RFC 3339 UTC.
	RetainUntil string `json:"retain_until"`
}

// SubjectOf is the data subject of the changes of delta id.
func SubjectOf(id string) string { return SubjectPrefix + id }

// DeltaOf is the delta id a subject of SubjectOf names, and whether it is
// one.
func DeltaOf(subject string) (string, bool) {
	id, ok := strings.CutPrefix(subject, SubjectPrefix)
	return id, ok && uuidPattern.MatchString(id)
}

// RetainUntilTime is Sealed.RetainUntil as a time.
func (s *Sealed) RetainUntilTime() (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s.RetainUntil)
	if err != nil || t.UTC().Format(time.RFC3339Nano) != s.RetainUntil {
		return time.Time{}, fmt.Errorf("retain_until %q is not RFC 3339 UTC in canonical form", s.RetainUntil)
	}
	return t, nil
}

func (d *Delta) validateSealed() error {
	s := d.Sealed
	if s.Subject != SubjectOf(d.DeltaID) {
		return fmt.Errorf("delta %s: sealed subject %q is not %q", d.DeltaID, s.Subject, SubjectOf(d.DeltaID))
	}
	if !oidPattern.MatchString(s.Commitment) {
		return fmt.Errorf("delta %s: sealed commitment %q is not \"sha256:<64 lower-case hex>\"", d.DeltaID, s.Commitment)
	}
	until, err := s.RetainUntilTime()
	if err != nil {
		return fmt.Errorf("delta %s: %v", d.DeltaID, err)
	}
	if at, _ := time.Parse(time.RFC3339Nano, d.Timestamp); !until.After(at) {
		return fmt.Errorf("delta %s: retain_until %s is not after its timestamp", d.DeltaID, s.RetainUntil)
	}
	return nil
}

// Logged is d as the log holds it: a sealed delta without its changes.
func (d Delta) Logged() Delta {
	if d.Sealed != nil {
		d.Changes = nil
	}
	return d
}
