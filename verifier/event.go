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

	hasSession bool
	delta      []byte // the "delta" member's JSON, for session.delta events
}

var (
	uuidPattern    = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	actorIDPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	kindPattern    = regexp.MustCompile(`^[a-z][a-z_]*(\.[a-z][a-z_]*)*$`)
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
	switch {
	case len(entry) == 0:
		return nil, errors.New("entry is empty")
	case len(entry) > MaxEntrySize:
		return nil, fmt.Errorf("entry is %d bytes, more than %d", len(entry), MaxEntrySize)
	case !utf8.Valid(entry):
		return nil, errors.New("entry is not valid UTF-8")
	}
	canonical, err := jcs.Transform(entry)
	if err != nil {
		return nil, fmt.Errorf("entry is not valid JSON: %v", err)
	}
	if !bytes.Equal(canonical, entry) {
		return nil, errors.New("entry is not in canonical form (RFC 8785)")
	}
	var fields struct {
		V       *int             `json:"v"`
		ID      *string          `json:"id"`
		Time    *string          `json:"time"`
		Kind    *string          `json:"kind"`
		Actor   *string          `json:"actor"`
		Session *string          `json:"session"`
		Delta   *json.RawMessage `json:"delta"`
		Action  *struct {
			Type   *string `json:"type"`
			Target *string `json:"target"`
		} `json:"action"`
	}
	if err := json.Unmarshal(entry, &fields); err != nil {
		return nil, fmt.Errorf("entry is not an event object: %v", err)
	}
	for name, set := range map[string]bool{"v": fields.V != nil, "id": fields.ID != nil, "time": fields.Time != nil, "kind": fields.Kind != nil, "actor": fields.Actor != nil} {
		if !set {
			return nil, fmt.Errorf("entry lacks the field %q", name)
		}
	}
	if *fields.V != EventVersion {
		return nil, fmt.Errorf("event version %d is not %d", *fields.V, EventVersion)
	}
	ev := &Event{ID: *fields.ID, Kind: *fields.Kind, Actor: *fields.Actor}
	if !uuidPattern.MatchString(ev.ID) {
		return nil, fmt.Errorf("event id %q is not a lower-case UUID", ev.ID)
	}
	t, err := time.Parse(time.RFC3339Nano, *fields.Time)
	if err != nil || t.UTC().Format(time.RFC3339Nano) != *fields.Time {
		return nil, fmt.Errorf("event %s: time %q is not RFC 3339 UTC in canonical form", ev.ID, *fields.Time)
	}
	ev.Time = t
	if fields.Session != nil {
		ev.Session, ev.hasSession = *fields.Session, true
	}
	if fields.Delta != nil {
		ev.delta = *fields.Delta
	}
	if !kindPattern.MatchString(ev.Kind) {
		return nil, fmt.Errorf("event %s: kind %q is malformed", ev.ID, ev.Kind)
	}
	if !actorIDPattern.MatchString(ev.Actor) {
		return nil, fmt.Errorf("event %s: actor %q is not a valid actor id", ev.ID, ev.Actor)
	}
	switch ev.Kind {
	case "action", "action.denied", "hold.requested":
		a := fields.Action
		if a == nil || a.Type == nil || a.Target == nil {
			return nil, fmt.Errorf("event %s: an %s event lacks action.type or action.target", ev.ID, ev.Kind)
		}
		switch *a.Type {
		case "observe", "create", "mutate", "execute":
		default:
			return nil, fmt.Errorf("event %s: unknown action type %q", ev.ID, *a.Type)
		}
		ev.Type, ev.Target = *a.Type, *a.Target
	}
	return ev, nil
}
