package event

import (
	"bytes"
	"math"
)

// parseAction reads an entry that passed checkJSON in the form appendAction
// writes — an action event without a hold, a signature, a sealed payload
// or declared resources — member by member, without reflection. It answers
// false, and Parse reads the entry with the general decoder, for anything
// else, and for whatever it does not read simply (a string with an escape,
// a null payload). Parse then checks what it read exactly as it checks the
// general decoder's event: valid, and encoded again to the same bytes.
// FuzzParse holds the two to the same events as encoding/json.
//
// Why: a replay parses every entry of the log, and the general decoder
// took more than half of a parse (reflection, a token at a time); nearly
// every entry is an action.
func parseAction(entry []byte) (*Event, bool) {
	r := canonReader{b: entry}
	if !r.lit(`{"action":{`) {
		return nil, false
	}
	a, ok := r.action()
	if !ok || !r.lit(`,"actor":`) {
		return nil, false
	}
	e := &Event{Action: a, Kind: KindAction, Decision: &Decision{}}
	ok = r.str(&e.Actor) && r.lit(`,"decision":{"cost":`) && r.decision(e.Decision) &&
		r.lit(`,"id":`) && r.str(&e.ID) && r.lit(`,"kind":"action"`) && r.tail(e)
	return e, ok
}

// decision reads a decision's members after "cost", and its closing brace.
func (r *canonReader) decision(d *Decision) bool {
	return r.uint(&d.Cost) &&
		r.lit(`,"outcome":`) && r.str(&d.Outcome) &&
		r.lit(`,"reserved":`) && r.uint(&d.Reserved) &&
		r.lit(`,"settled":`) && r.uint(&d.Settled) && r.lit(`}`)
}

// tail reads an action event's members after its kind, and the end.
func (r *canonReader) tail(e *Event) bool {
	return (!r.lit(`,"session":`) || r.str(&e.Session)) &&
		r.lit(`,"time":`) && r.time(&e.Time) &&
		(!r.lit(`,"trace_id":`) || r.str(&e.TraceID)) &&
		r.lit(`,"v":`) && r.version(&e.V) &&
		r.lit(`}`) && r.i == len(r.b)
}

// action reads an action's object after its opening brace, and the
// closing one.
func (r *canonReader) action() (*Action, bool) {
	a := &Action{}
	if r.lit(`"envelope":`) && !(r.str(&a.Envelope) && r.lit(`,`)) {
		return nil, false
	}
	if r.lit(`"payload":`) {
		// A payload canonical as it stands, as appendAction writes it.
		c := canonScanner{b: r.b, i: r.i}
		if !c.value(0) || r.b[r.i] == 'n' {
			return nil, false
		}
		a.Payload, r.i = bytes.Clone(r.b[r.i:c.i]), c.i
		if !r.lit(`,`) {
			return nil, false
		}
	}
	if r.lit(`"payload_hash":`) && !(r.str(&a.PayloadHash) && r.lit(`,`)) {
		return nil, false
	}
	var typ string
	ok := r.lit(`"target":`) && r.str(&a.Target) &&
		r.lit(`,"type":`) && r.str(&typ) && r.lit(`}`)
	a.Type = ActionType(typ)
	return a, ok
}

// canonReader reads canonical JSON that passed checkJSON: valid UTF-8,
// valid JSON, no duplicate members.
type canonReader struct {
	b []byte
	i int
}

// lit reads s if the input goes on with it.
func (r *canonReader) lit(s string) bool {
	if len(r.b)-r.i < len(s) || string(r.b[r.i:r.i+len(s)]) != s {
		return false
	}
	r.i += len(s)
	return true
}

// str reads a string without escapes into s.
func (r *canonReader) str(s *string) bool {
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return false
	}
	end := bytes.IndexByte(r.b[r.i+1:], '"')
	if end < 0 {
		return false
	}
	body := r.b[r.i+1 : r.i+1+end]
	if bytes.IndexByte(body, '\\') >= 0 {
		return false
	}
	*s = string(body)
	r.i += end + 2
	return true
}

// digits reads a run of decimal digits.
func (r *canonReader) digits() []byte {
	start := r.i
	for r.i < len(r.b) && '0' <= r.b[r.i] && r.b[r.i] <= '9' {
		r.i++
	}
	return r.b[start:r.i]
}

// uint reads a JSON number that is an unsigned integer into n: at most
// 19 digits, which cannot overflow (an event's numbers are at most 2^53).
func (r *canonReader) uint(n *uint64) bool {
	d := r.digits()
	if len(d) == 0 || len(d) > 19 {
		return false
	}
	var v uint64
	for _, c := range d {
		v = v*10 + uint64(c-'0')
	}
	*n = v
	return true
}

// version reads a non-negative JSON integer into an int.
func (r *canonReader) version(v *int) bool {
	var n uint64
	if !r.uint(&n) || n > math.MaxInt32 {
		return false
	}
	*v = int(n)
	return true
}

// time reads an instant as Instant's UnmarshalJSON does.
func (r *canonReader) time(t *Instant) bool {
	c := canonScanner{b: r.b, i: r.i}
	if _, ok := c.str(false); !ok || t.UnmarshalJSON(r.b[r.i:c.i]) != nil {
		return false
	}
	r.i = c.i
	return true
}
