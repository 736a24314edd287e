package verifier

import (
	"unicode/utf8"
)

// fastEvent is ParseEvent's fast path, for bundles of millions of events. It
// checks canonical form (RFC 8785) with one pass over the bytes instead of
// re-encoding the entry, but only for the subset of JSON it can judge with
// certainty: ASCII member names without escapes, integers of at most 15
// digits (exact in a double, so their canonical form is their digits), at
// most maxFastDepth levels. For anything else, and for any entry it would
// refuse, it answers ok == false and the caller MUST fall back to the full
// parser, which then accepts or names the error. So it never decides a
// refusal, and it accepts only what the full parser accepts (a fuzz test
// compares the two).
func fastEvent(entry []byte) (ev *Event, ok bool) {
	if len(entry) == 0 || len(entry) > MaxEntrySize || !utf8.Valid(entry) {
		return nil, false
	}
	s := scanner{b: entry}
	var f eventFields
	if !s.object(0, &f) || s.i != len(s.b) || !f.wellFormed() {
		return nil, false
	}
	t, ok := canonicalTime(f.time)
	if !ok {
		return nil, false
	}
	if f.hasTraceID && !isTraceID(f.traceID) {
		return nil, false
	}
	ev = &Event{ID: f.id, Time: t, Kind: f.kind, Actor: f.actor, Session: f.session, hasSession: f.hasSession, delta: f.delta, TraceID: f.traceID}
	if isActionKind(ev.Kind) {
		if !isActionType(f.actionType) || !f.hasTarget {
			return nil, false
		}
		ev.Type, ev.Target = f.actionType, f.target
	}
	return ev, true
}

// maxFastDepth bounds nesting on the fast path; deeper entries go to the
// full parser.
const maxFastDepth = 48

// eventFields are the members fastEvent extracts. A member it extracts that
// is not a plain string (or, for v, the integer 1) sends the entry to the
// full parser, which gives the precise error.
type eventFields struct {
	v                                bool
	id, time, kind, actor, session   string
	hasSession                       bool
	traceID                          string
	hasTraceID                       bool
	actionType, target               string
	hasTarget                        bool
	delta                            []byte
	inAction, sawAction, sawDelta    bool
	unknownCaseField, nonStringField bool
}

// wellFormed says whether the members every event has are there and
// well-formed, but for the time, which fastEvent parses.
func (f *eventFields) wellFormed() bool {
	return f.v && isUUID(f.id) && isActorID(f.actor) && isKind(f.kind)
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// value scans one canonical JSON value. f is non-nil only for the values
// whose members are extracted (the event object and its action).
func (s *scanner) value(depth int, f *eventFields) bool {
	switch c := s.peek(); {
	case c == '{':
		return s.object(depth, f)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, _, _, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// number accepts only integers of at most 15 digits, without "-0".
func (s *scanner) number() bool {
	start := s.i
	if s.peek() == '-' {
		s.i++
	}
	digits := s.i
	if s.peek() == '0' {
		s.i++
	} else {
		for c := s.peek(); c >= '0' && c <= '9'; c = s.peek() {
			s.i++
		}
	}
	n := s.i - digits
	if n == 0 || n > 15 {
		return false
	}
	if c := s.peek(); c == '.' || c == 'e' || c == 'E' || c >= '0' && c <= '9' {
		return false
	}
	if s.b[start] == '-' && s.b[digits] == '0' {
		return false // -0 is written 0
	}
	return true
}

// str scans a string in canonical form and returns the span of its content
// and whether it held escapes. Canonical escapes are \" \\ \b \t \n \f \r and
// \u00xx (lower-case hex) for the other characters below U+0020.
func (s *scanner) str() (start, end int, escaped, ok bool) {
	s.i++ // the opening quote
	start = s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			end = s.i
			s.i++
			return start, end, escaped, true
		case c < 0x20:
			return 0, 0, false, false
		case c == '\\':
			escaped = true
			if !s.escape() {
				return 0, 0, false, false
			}
		default:
			s.i++
		}
	}
	return 0, 0, false, false
}

// escape scans one escape sequence in canonical form.
func (s *scanner) escape() bool {
	if s.i+1 >= len(s.b) {
		return false
	}
	switch s.b[s.i+1] {
	case '"', '\\', 'b', 't', 'n', 'f', 'r':
		s.i += 2
		return true
	case 'u':
		if len(s.b)-s.i < 6 || s.b[s.i+2] != '0' || s.b[s.i+3] != '0' {
			return false
		}
		hi, lo := s.b[s.i+4], s.b[s.i+5]
		if hi != '0' && hi != '1' || !(lo >= '0' && lo <= '9' || lo >= 'a' && lo <= 'f') {
			return false
		}
		switch string(s.b[s.i+4 : s.i+6]) {
		case "08", "09", "0a", "0c", "0d":
			return false // these have short forms
		}
		s.i += 6
		return true
	}
	return false
}

func (s *scanner) array(depth int) bool {
	if depth >= maxFastDepth {
		return false
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth+1, nil) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// object scans an object whose member names are canonical (memberName).
// With f, it extracts the event's members (depth 0) or the action's
// (f.inAction).
func (s *scanner) object(depth int, f *eventFields) bool {
	if depth >= maxFastDepth || s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	var prev []byte
	for {
		key, ok := s.memberName(prev, f != nil)
		if !ok {
			return false
		}
		prev = key
		if f == nil {
			ok = s.value(depth+1, nil)
		} else {
			ok = s.member(depth, string(key), f)
		}
		if !ok {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// memberName scans a member's name and its colon. The name must be ASCII
// without escapes and above prev (for ASCII, byte order is UTF-16 order);
// an extracted object's names must have no upper case.
func (s *scanner) memberName(prev []byte, extracted bool) ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	ks, ke, esc, ok := s.str()
	if !ok || esc {
		return nil, false
	}
	key := s.b[ks:ke]
	for _, c := range key {
		if c >= 0x80 || extracted && c >= 'A' && c <= 'Z' {
			// Non-ASCII names need UTF-16 ordering; upper case could
			// match an extracted member case-insensitively in the full
			// parser (encoding/json).
			return nil, false
		}
	}
	if prev != nil && string(prev) >= string(key) {
		return nil, false
	}
	if s.peek() != ':' {
		return nil, false
	}
	s.i++
	return key, true
}

// member scans the value of an extracted object's member.
func (s *scanner) member(depth int, key string, f *eventFields) bool {
	if f.inAction {
		return s.actionMember(depth, key, f)
	}
	switch key {
	case "v":
		return s.versionOne(f)
	case "id":
		return s.plain(&f.id)
	case "time":
		return s.plain(&f.time)
	case "kind":
		return s.plain(&f.kind)
	case "actor":
		return s.plain(&f.actor)
	case "session":
		f.hasSession = true
		return s.plain(&f.session)
	case "trace_id":
		f.hasTraceID = true
		return s.plain(&f.traceID)
	case "action":
		f.inAction = true
		ok := s.object(depth+1, f)
		f.inAction = false
		return ok
	case "delta":
		start := s.i
		if s.peek() != '{' || !s.object(depth+1, nil) {
			return false
		}
		f.delta = s.b[start:s.i]
		return true
	}
	return s.value(depth+1, nil)
}

// actionMember scans the value of a member of the event's action.
func (s *scanner) actionMember(depth int, key string, f *eventFields) bool {
	switch key {
	case "type":
		return s.plain(&f.actionType)
	case "target":
		f.hasTarget = true
		return s.plain(&f.target)
	}
	return s.value(depth+1, nil)
}

// versionOne scans the event's v, which must be the integer 1.
func (s *scanner) versionOne(f *eventFields) bool {
	if !s.literal("1") || s.peek() >= '0' && s.peek() <= '9' {
		return false
	}
	f.v = true
	return true
}

// plain scans a string without escapes into dst.
func (s *scanner) plain(dst *string) bool {
	if s.peek() != '"' {
		return false
	}
	st, en, esc, ok := s.str()
	if !ok || esc {
		return false
	}
	*dst = string(s.b[st:en])
	return true
}

func isUUID(s string) bool {
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

// isActorID is [a-z][a-z0-9-]{0,63}.
func isActorID(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isKind is [a-z][a-z_]*(\.[a-z][a-z_]*)*.
func isKind(s string) bool {
	segStart := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			segStart = false
		case c == '_' && !segStart:
		case c == '.' && !segStart:
			segStart = true
		default:
			return false
		}
	}
	return len(s) > 0 && !segStart
}
