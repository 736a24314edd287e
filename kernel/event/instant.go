package event

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Instant is a point in time as events carry it: in JSON, RFC 3339 in UTC
// with nanoseconds and no trailing zeros ("2026-12-01T00:00:00.5Z"). It is
// parsed once, where it enters, and compared as an instant, never as text:
// as text "…00:00.5Z" sorts before "…00:00Z", half a second earlier than
// the instant it names.
//
// The zero Instant means "not set": fields that may be absent are tagged
// omitzero, and JSON never carries the zero time.
type Instant struct{ time.Time }

// At returns t as an Instant: in UTC, without a monotonic clock reading, so
// that instants compare equal exactly when they name the same time.
func At(t time.Time) Instant {
	if t.IsZero() {
		return Instant{}
	}
	return Instant{t.UTC().Round(0)}
}

// ParseInstant parses the canonical form only: one instant has one
// spelling in the log.
func ParseInstant(s string) (Instant, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || FormatTime(t) != s {
		return Instant{}, fmt.Errorf("time %q is not RFC 3339 UTC in canonical form", s)
	}
	if t.IsZero() {
		return Instant{}, fmt.Errorf("time %q is the zero time", s)
	}
	return At(t), nil
}

// String is the canonical form, "" for the zero Instant.
func (i Instant) String() string {
	if i.IsZero() {
		return ""
	}
	return FormatTime(i.Time)
}

// Before reports whether i is before j.
func (i Instant) Before(j Instant) bool { return i.Time.Before(j.Time) }

// After reports whether i is after j.
func (i Instant) After(j Instant) bool { return i.Time.After(j.Time) }

// Add returns i+d.
func (i Instant) Add(d time.Duration) Instant { return At(i.Time.Add(d)) }

// ReachedBy reports whether a deadline or expiry i has come by now: a set
// instant at or before now. The zero Instant (no deadline) never has.
func (i Instant) ReachedBy(now Instant) bool { return !i.IsZero() && !now.Before(i) }

// MarshalJSON writes the canonical form.
func (i Instant) MarshalJSON() ([]byte, error) {
	if i.IsZero() {
		return nil, errors.New("the zero time has no JSON form (tag the field omitzero)")
	}
	return strconv.AppendQuote(nil, i.String()), nil
}

// UnmarshalJSON reads the canonical form and nothing else.
func (i *Instant) UnmarshalJSON(data []byte) error {
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' || bytes.IndexByte(data[1:len(data)-1], '\\') >= 0 {
		return fmt.Errorf("time %s is not a JSON string in RFC 3339 form", data)
	}
	v, err := ParseInstant(string(data[1 : len(data)-1]))
	if err != nil {
		return err
	}
	*i = v
	return nil
}

// writable reports whether t is unset or has an RFC 3339 form. Every
// event's time is checked, so the year is computed once.
func writable(t Instant) bool {
	if t.IsZero() {
		return true
	}
	y := t.Year()
	return y >= 1 && y <= 9999
}

// validateTime checks that a set instant has an RFC 3339 form, which
// needs a four-digit year: an expiry in the year 10000 would encode to an
// entry that Parse refuses.
func validateTime(what string, t Instant) error {
	if !writable(t) {
		return fmt.Errorf("%s %v is outside the years 0001 to 9999 that RFC 3339 can write", what, t.Time)
	}
	return nil
}
