package event

import (
	"fmt"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// An event carries its id, time, actor and kind, and the parts its kind
// calls for: the members of Event that only some kinds carry. Each part is
// declared once, in parts, beside the Event struct (event.go: its JSON
// name, how to tell that an event carries it, its check), and each kind
// once, in kinds, by the file of its concept (the parts its events must or
// may carry). A part's type and its check sit together in the file of its
// concept (hold.go, elevation.go, ...).

// part describes one part of an event.
type part struct {
	// name is the part's member name in the entry.
	name string
	// carried reports whether an event carries the part.
	carried func(*Event) bool
	// check checks the part of an event that carries it. Each part's
	// type has its check method, given the event: some parts depend on
	// the event's kind or on its other members.
	check func(*Event) error
}

// partSet is a set of parts, bit i standing for parts[i].
type partSet uint64

// A partSet has a bit for every part: this fails to compile otherwise.
var _ [64 - len(parts)]struct{}

// carriedParts is the set of parts e carries.
func (e *Event) carriedParts() partSet {
	var set partSet
	for i := range parts {
		if parts[i].carried(e) {
			set |= 1 << i
		}
	}
	return set
}

// partRule is one part a kind carries: must or may.
type partRule struct {
	name     string
	required bool
}

func must(name string) partRule { return partRule{name, true} }
func may(name string) partRule  { return partRule{name, false} }

// kindSpec is what kinds knows of one kind: the parts its events must and
// may carry, and the order their checks run in.
type kindSpec struct {
	required, allowed partSet
	checks            []int // indices in parts
}

// carries builds a kind's spec from its parts, listed in the order they
// are checked. The order shows only in which error an event that breaks
// two checks at once is refused with, and is the order the kernel has
// always checked them in.
func carries(rules ...partRule) kindSpec {
	var k kindSpec
	for _, r := range rules {
		i := slices.IndexFunc(parts[:], func(p part) bool { return p.name == r.name })
		if i < 0 {
			panic("event: a kind carries a part parts lacks: " + r.name)
		}
		if k.allowed&(1<<i) != 0 {
			panic("event: a kind lists a part twice: " + r.name)
		}
		k.allowed |= 1 << i
		if r.required {
			k.required |= 1 << i
		}
		k.checks = append(k.checks, i)
	}
	return k
}

// kinds says, for every kind, the parts its events carry; a part not
// listed is forbidden. Signed is not a part: any event but the kernel's
// own may carry it. Each kind's row is in the file of its concept, beside
// the kind's constant (an init of that file adds it).
var kinds = map[Kind]kindSpec{}

// Kinds returns every kind of event, sorted.
func Kinds() []Kind {
	list := make([]Kind, 0, len(kinds))
	for k := range kinds {
		list = append(list, k)
	}
	slices.Sort(list)
	return list
}

func (e *Event) validate() error {
	if err := e.checkMembers(); err != nil {
		return err
	}
	kind, ok := kinds[e.Kind]
	if !ok {
		return fmt.Errorf("event %s: unknown kind %q", e.ID, e.Kind)
	}
	carried := e.carriedParts()
	if wrong := kind.required&^carried | carried&^kind.allowed; wrong != 0 {
		i := bits.TrailingZeros64(uint64(wrong))
		if kind.required&(1<<i) != 0 {
			return fmt.Errorf("event %s of kind %s lacks %q", e.ID, e.Kind, parts[i].name)
		}
		return fmt.Errorf("event %s of kind %s may not carry %q", e.ID, e.Kind, parts[i].name)
	}
	if e.Signed != nil {
		if err := e.Signed.checkOn(e); err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
	}
	if e.TraceID != "" && !ValidTraceID(e.TraceID) {
		return fmt.Errorf("event %s: trace_id %q is not 32 lower-case hex digits other than all zeros (a W3C trace id)", e.ID, e.TraceID)
	}
	for _, i := range kind.checks {
		if carried&(1<<i) == 0 {
			continue
		}
		if err := parts[i].check(e); err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
	}
	return nil
}

// checkMembers checks the members every event carries: version, id,
// time and actor.
func (e *Event) checkMembers() error {
	if e.V != Version {
		return fmt.Errorf("event version %d is not %d", e.V, Version)
	}
	if !validUUID(e.ID) {
		return fmt.Errorf("event id %q is not a lower-case UUID", e.ID)
	}
	if e.Time.IsZero() {
		return fmt.Errorf("event %s has no time", e.ID)
	}
	if !writable(e.Time) { // the message is built only when it is needed
		return validateTime("event "+e.ID+" time", e.Time)
	}
	if !ValidActorID(e.Actor) {
		return fmt.Errorf("event %s: actor %q is not a valid actor id", e.ID, e.Actor)
	}
	return nil
}

func validateText(what, s string, limit int) error {
	if len(s) > limit || !utf8.ValidString(s) {
		return fmt.Errorf("%s must be at most %d bytes of UTF-8", what, limit)
	}
	return nil
}
