package verifier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxEntrySize is the largest log entry: the 16-bit length prefix of a
// c2sp.org/tlog-tiles entry bundle.
const MaxEntrySize = 65535

// EventVersion is the only event encoding this verifier knows.
const EventVersion = 1

// Event is what the verifier reads from an entry: the fields every Annal
// event carries, plus the action's type and target when it records one.
type Event struct {
	ID     string
	Time   time.Time
	Kind   string
	Actor  string
	Type   string // action type, for kinds action, action.denied, hold.requested
	Target string // action target, for those kinds
	// Session is the event's "session" member, for session-scoped events.
	Session string
	// TraceID is the event's "trace_id" member, if it has one: the W3C
	// trace id of the request it records.
	TraceID string

	hasSession bool
	delta      []byte // the "delta" member's JSON, for session.delta events
}

var (
	uuidPattern    = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	actorIDPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	kindPattern    = regexp.MustCompile(`^[a-z][a-z_]*(\.[a-z][a-z_]*)*$`)
	traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// ParseEvent checks that entry is a well-formed Annal event (version 1) and
// returns its common fields. It is written apart from the kernel's encoder,
// from testvectors/FORMATS.md: the bytes must be RFC 8785 canonical JSON, an
// object with v, id, time, kind and actor. Kinds it does not know are
// accepted, so that a verifier of today can read events of later kinds; an
// "action", "action.denied" or "hold.requested" event must carry a known
// type and a target.
func ParseEvent(entry []byte) (*Event, error) {
	if ev, ok := fastEvent(entry); ok {
		return ev, nil
	}
	return parseEventSlow(entry)
}

// parseEventSlow is ParseEvent without the fast path: it re-encodes the
// entry and compares.
func parseEventSlow(entry []byte) (*Event, error) {
	if err := checkCanonicalEntry(entry); err != nil {
		return nil, err
	}
	var fields eventMembers
	if err := json.Unmarshal(entry, &fields); err != nil {
		return nil, fmt.Errorf("entry is not an event object: %v", err)
	}
	ev, err := commonFields(&fields)
	if err != nil {
		return nil, err
	}
	if isActionKind(ev.Kind) {
		if ev.Type, ev.Target, err = actionFields(ev, fields.Action); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// checkCanonicalEntry checks that entry is UTF-8 in canonical form (RFC
// 8785), within MaxEntrySize.
func checkCanonicalEntry(entry []byte) error {
	switch {
	case len(entry) == 0:
		return errors.New("entry is empty")
	case len(entry) > MaxEntrySize:
		return fmt.Errorf("entry is %d bytes, more than %d", len(entry), MaxEntrySize)
	case !utf8.Valid(entry):
		return errors.New("entry is not valid UTF-8")
	}
	canonical, err := jcs.Transform(entry)
	if err != nil {
		return fmt.Errorf("entry is not valid JSON: %v", err)
	}
	if !bytes.Equal(canonical, entry) {
		return errors.New("entry is not in canonical form (RFC 8785)")
	}
	return nil
}

// eventMembers are the members the full parser reads. It and eventAction
// are aliases of unnamed struct types, as encoding/json names a defined
// type in the decoding errors the parser reports.
type eventMembers = struct {
	V       *int             `json:"v"`
	ID      *string          `json:"id"`
	Time    *string          `json:"time"`
	Kind    *string          `json:"kind"`
	Actor   *string          `json:"actor"`
	Session *string          `json:"session"`
	TraceID *string          `json:"trace_id"`
	Delta   *json.RawMessage `json:"delta"`
	Action  *eventAction     `json:"action"`
}

type eventAction = struct {
	Type   *string `json:"type"`
	Target *string `json:"target"`
}

// commonFields checks the members every event has and the optional session
// and delta, and returns them as an Event.
func commonFields(f *eventMembers) (*Event, error) {
	// In the order of the format, so that the first missing field is named.
	for _, field := range []struct {
		name string
		set  bool
	}{{"v", f.V != nil}, {"id", f.ID != nil}, {"time", f.Time != nil}, {"kind", f.Kind != nil}, {"actor", f.Actor != nil}} {
		if !field.set {
			return nil, fmt.Errorf("entry lacks the field %q", field.name)
		}
	}
	if *f.V != EventVersion {
		return nil, fmt.Errorf("event version %d is not %d", *f.V, EventVersion)
	}
	ev := &Event{ID: *f.ID, Kind: *f.Kind, Actor: *f.Actor}
	if !uuidPattern.MatchString(ev.ID) {
		return nil, fmt.Errorf("event id %q is not a lower-case UUID", ev.ID)
	}
	t, ok := canonicalTime(*f.Time)
	if !ok {
		return nil, fmt.Errorf("event %s: time %q is not RFC 3339 UTC in canonical form", ev.ID, *f.Time)
	}
	ev.Time = t
	if f.Session != nil {
		ev.Session, ev.hasSession = *f.Session, true
	}
	if f.Delta != nil {
		ev.delta = *f.Delta
	}
	if f.TraceID != nil {
		if !isTraceID(*f.TraceID) {
			return nil, fmt.Errorf("event %s: trace_id %q is not 32 lower-case hex digits other than all zeros", ev.ID, *f.TraceID)
		}
		ev.TraceID = *f.TraceID
	}
	if !kindPattern.MatchString(ev.Kind) {
		return nil, fmt.Errorf("event %s: kind %q is malformed", ev.ID, ev.Kind)
	}
	if !actorIDPattern.MatchString(ev.Actor) {
		return nil, fmt.Errorf("event %s: actor %q is not a valid actor id", ev.ID, ev.Actor)
	}
	return ev, nil
}

// actionFields are the type and target of an event that records an action.
func actionFields(ev *Event, a *eventAction) (typ, target string, _ error) {
	if a == nil || a.Type == nil || a.Target == nil {
		return "", "", fmt.Errorf("event %s: an %s event lacks action.type or action.target", ev.ID, ev.Kind)
	}
	if !isActionType(*a.Type) {
		return "", "", fmt.Errorf("event %s: unknown action type %q", ev.ID, *a.Type)
	}
	return *a.Type, *a.Target, nil
}

// isActionKind says whether events of kind record an action: they carry
// its type and target.
func isActionKind(kind string) bool {
	switch kind {
	case "action", "action.denied", "hold.requested":
		return true
	}
	return false
}

// isActionType says whether t is a type of action this verifier knows.
func isActionType(t string) bool {
	switch t {
	case "observe", "create", "mutate", "execute":
		return true
	}
	return false
}

// isTraceID says whether s is a W3C trace id as an event carries it: 32
// lower-case hex digits, not all zeros.
func isTraceID(s string) bool {
	return traceIDPattern.MatchString(s) && s != "00000000000000000000000000000000"
}

// canonicalTime parses s, which must be RFC 3339 in UTC, in the one form
// the format allows.
func canonicalTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	var canonical [64]byte
	if err != nil || string(t.UTC().AppendFormat(canonical[:0], time.RFC3339Nano)) != s {
		return time.Time{}, false
	}
	return t, true
}
