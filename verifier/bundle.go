package verifier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/annal-dev/annal/checkpoints"
	"github.com/annal-dev/annal/format/bundle"
	"github.com/gowebpki/jcs"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Limits on the strings of a selection.
const (
	maxSelectionActor   = 64
	maxSelectionSession = 256
	maxSelectionKind    = 64
)

// The checks of a bundle, in addition to those of a single proof.
const (
	CheckBundle    Check = "bundle format"
	CheckSelection Check = "selection"
	CheckDelta     Check = "delta chain"
)

// selection is a header's selection with its times parsed by check.
type selection struct {
	bundle.Selection
	since, until time.Time
}

// bundleEvent is one parsed event line.
type bundleEvent struct {
	index    uint64
	entry    []byte
	keyEvent bool
	opened   *opening
	proof    [][]byte
}

// parseJSONLine decodes a header or trailer line strictly: valid UTF-8, no
// duplicate or unknown members, and byte for byte the RFC 8785 encoding of
// what it decodes to (so every value has one spelling and member names are
// exact, although encoding/json matches them without regard to case).
func parseJSONLine(line []byte, v any) error {
	if !utf8.Valid(line) {
		return errors.New("not valid UTF-8")
	}
	if !json.Valid(line) {
		return errors.New("not a JSON value")
	}
	if err := noDuplicates(json.NewDecoder(bytes.NewReader(line)), 0); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	again, err := json.Marshal(v)
	if err != nil {
		return err
	}
	canonical, err := jcs.Transform(again)
	if err != nil {
		return err
	}
	if !bytes.Equal(canonical, line) {
		return fmt.Errorf("not the canonical (RFC 8785) encoding of its members: expected %s", abbreviate(string(canonical)))
	}
	return nil
}

// check validates a selection's own values: the names it matches, then
// its bounds.
func (s *selection) check() error {
	if err := s.checkNames(); err != nil {
		return err
	}
	if s.From != nil && s.To != nil && *s.From >= *s.To {
		return fmt.Errorf("selection from %d is not below to %d", *s.From, *s.To)
	}
	return s.parseTimes()
}

// checkNames checks the actor, session and kind a selection matches.
func (s *selection) checkNames() error {
	if len(s.Actor) > maxSelectionActor || s.Actor != "" && !isActorID(s.Actor) {
		return fmt.Errorf("selection actor %q is not an actor id", abbreviate(s.Actor))
	}
	if s.Session != "" && !isIdentifier(s.Session) {
		return fmt.Errorf("selection session %q is not a session id", abbreviate(s.Session))
	}
	if len(s.Kind) > maxSelectionKind || s.Kind != "" && !isKind(s.Kind) {
		return fmt.Errorf("selection kind %q is not an event kind", abbreviate(s.Kind))
	}
	return nil
}

// parseTimes parses since and until, each optional; since must be before
// until.
func (s *selection) parseTimes() error {
	var err error
	if s.since, err = selectionTime("since", s.Since); err != nil {
		return err
	}
	if s.until, err = selectionTime("until", s.Until); err != nil {
		return err
	}
	if s.Since != "" && s.Until != "" && !s.since.Before(s.until) {
		return fmt.Errorf("selection since %s is not before until %s", s.Since, s.Until)
	}
	return nil
}

// selectionTime parses the selection's member what, if it is set.
func selectionTime(what, value string) (time.Time, error) {
	if value == "" {
		return time.Time{}, nil
	}
	t, err := parseTime(value)
	if err != nil {
		return t, fmt.Errorf("selection %s: %v", what, err)
	}
	return t, nil
}

// filtered reports whether the selection has members other than from and to.
func (s *selection) filtered() bool {
	return s.Actor != "" || s.Kind != "" || s.Session != "" || s.Since != "" || s.Until != ""
}

// match says why an event does not match the selection, or "".
func (s *selection) match(index uint64, ev *Event) string {
	switch {
	case s.From != nil && index < *s.From:
		return fmt.Sprintf("index %d is below from %d", index, *s.From)
	case s.To != nil && index >= *s.To:
		return fmt.Sprintf("index %d is not below to %d", index, *s.To)
	case s.Actor != "" && ev.Actor != s.Actor:
		return fmt.Sprintf("actor %q is not %q", ev.Actor, s.Actor)
	case s.Session != "" && ev.Session != s.Session:
		return fmt.Sprintf("session %q is not %q", ev.Session, s.Session)
	case s.Kind != "" && ev.Kind != s.Kind:
		return fmt.Sprintf("kind %q is not %q", ev.Kind, s.Kind)
	case s.Since != "" && ev.Time.Before(s.since):
		return fmt.Sprintf("time %s is before since %s", ev.Time.UTC().Format(time.RFC3339Nano), s.Since)
	case s.Until != "" && !ev.Time.Before(s.until):
		return fmt.Sprintf("time %s is not before until %s", ev.Time.UTC().Format(time.RFC3339Nano), s.Until)
	}
	return ""
}

func parseTime(s string) (time.Time, error) {
	t, ok := canonicalTime(s)
	if !ok {
		return time.Time{}, fmt.Errorf("%q is not RFC 3339 UTC in canonical form", abbreviate(s))
	}
	return t, nil
}

// parseHashList decodes base64 hashes strictly.
func parseHashList(what string, list []string) ([][]byte, error) {
	if len(list) > checkpoints.MaxProofHashes {
		return nil, fmt.Errorf("%s has %d hashes, more than %d", what, len(list), checkpoints.MaxProofHashes)
	}
	out := make([][]byte, len(list))
	for i, s := range list {
		h, err := checkpoints.ParseHash(s)
		if err != nil {
			return nil, fmt.Errorf("%s hash %d: %v", what, i+1, err)
		}
		out[i] = h[:]
	}
	return out, nil
}

// The fixed parts of event lines and the trailer (bundle.EventLinePrefix
// and the rest), as bytes. Event lines are parsed by hand: a bundle holds
// millions of them.
var (
	eventLinePrefix = []byte(bundle.EventLinePrefix)
	eventLineIndex  = []byte(bundle.EventLineIndex)
	eventLineProof  = []byte(bundle.EventLineProof)

	eventLineKeyEvent  = []byte(bundle.EventLineKeyEvent)
	eventLineOpened    = []byte(bundle.EventLineOpened)
	eventLineSalt      = []byte(bundle.EventLineSalt)
	eventLineOpenedEnd = []byte(bundle.EventLineOpenedEnd)
	trailerPrefix      = []byte(bundle.TrailerPrefix)
)

// parseEventLine parses one event line; withProof says whether the bundle's
// lines carry inclusion proofs. The entry is decoded into buf (grown as
// needed and returned) after one byte 0x00, the RFC 6962 leaf prefix, so
// that buf[:1+len(entry)] is the leaf hash's input.
func parseEventLine(line []byte, withProof bool, buf []byte) (bundleEvent, []byte, error) {
	// The members in the order the format fixes; each that a line may
	// leave out reads nothing when it is absent. (Called one by one, not
	// from a table, so that r stays on the stack: a bundle has millions of
	// lines.)
	r := eventLineReader{rest: line, withProof: withProof, buf: buf}
	err := r.entry()
	if err == nil {
		err = r.index()
	}
	if err == nil {
		err = r.keyEvent()
	}
	if err == nil {
		err = r.opened()
	}
	if err == nil {
		err = r.proof()
	}
	if err == nil {
		err = r.end()
	}
	return r.e, r.buf, err
}

// eventLineReader holds an event line as its members are read.
type eventLineReader struct {
	rest      []byte // what follows the members read so far
	withProof bool
	buf       []byte
	e         bundleEvent
}

// entry decodes the entry's canonical base64 into buf, after the leaf prefix.
func (r *eventLineReader) entry() error {
	if !bytes.HasPrefix(r.rest, eventLinePrefix) {
		return fmt.Errorf("an event line starts with %s, this one with %q", eventLinePrefix, abbreviate(string(r.rest[:min(len(r.rest), len(eventLinePrefix))])))
	}
	rest := r.rest[len(eventLinePrefix):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return errors.New("the entry's string does not end")
	}
	b64 := rest[:end]
	if len(b64)%4 != 0 || len(b64) == 0 {
		return fmt.Errorf("entry is not canonical base64 (%d characters, not a positive multiple of 4)", len(b64))
	}
	if bytes.IndexByte(b64, '\r') >= 0 || bytes.IndexByte(b64, '\n') >= 0 {
		return errors.New("entry is not canonical base64 (line break)")
	}
	if need := 1 + base64.StdEncoding.DecodedLen(len(b64)); cap(r.buf) < need {
		r.buf = make([]byte, need, max(need, 1024))
	}
	r.buf = r.buf[:cap(r.buf)]
	r.buf[0] = rfc6962.RFC6962LeafHashPrefix
	n, err := base64.StdEncoding.Strict().Decode(r.buf[1:], b64)
	if err != nil {
		return fmt.Errorf("entry is not canonical base64: %v", err)
	}
	r.e.entry = r.buf[1 : 1+n]
	if len(r.e.entry) > MaxEntrySize {
		return fmt.Errorf("entry is %d bytes, more than %d", len(r.e.entry), MaxEntrySize)
	}
	r.rest = rest[end:]
	return nil
}

func (r *eventLineReader) index() error {
	if !bytes.HasPrefix(r.rest, eventLineIndex) {
		return fmt.Errorf("after the entry comes %s, not %q", eventLineIndex, abbreviate(string(r.rest[:min(len(r.rest), len(eventLineIndex))])))
	}
	rest := r.rest[len(eventLineIndex):]
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	var err error
	if r.e.index, err = checkpoints.ParseDecimal(string(rest[:i])); err != nil {
		return fmt.Errorf("index: %v", err)
	}
	r.rest = rest[i:]
	return nil
}

// keyEvent reads the mark of a key registration an inclusion bundle
// carries for the signatures.
func (r *eventLineReader) keyEvent() error {
	if !bytes.HasPrefix(r.rest, eventLineKeyEvent) {
		return nil
	}
	if !r.withProof {
		return errors.New("a range bundle has no key_event lines: it holds every entry of its range")
	}
	r.e.keyEvent, r.rest = true, r.rest[len(eventLineKeyEvent):]
	return nil
}

// opened reads the payload and salt that open the entry's sealed payload.
func (r *eventLineReader) opened() error {
	if !bytes.HasPrefix(r.rest, eventLineOpened) {
		return nil
	}
	if r.e.keyEvent {
		return errors.New("a key_event line opens no sealed payload")
	}
	var err error
	r.e.opened, r.rest, err = parseOpened(r.rest[len(eventLineOpened):])
	return err
}

// proof reads the inclusion proof every line of an inclusion bundle has.
func (r *eventLineReader) proof() error {
	if !r.withProof {
		return nil
	}
	if !bytes.HasPrefix(r.rest, eventLineProof) {
		return fmt.Errorf("an event line of an inclusion bundle has %s after its index", eventLineProof)
	}
	r.rest = r.rest[len(eventLineProof):]
	for len(r.rest) > 0 && r.rest[0] != ']' {
		if err := r.proofHash(); err != nil {
			return err
		}
	}
	if len(r.rest) == 0 {
		return errors.New("the proof list does not end")
	}
	r.rest = r.rest[1:]
	return nil
}

// proofHash reads one quoted hash of the proof, after its comma if it is
// not the first.
func (r *eventLineReader) proofHash() error {
	rest, n := r.rest, len(r.e.proof)+1
	if n > 1 {
		if rest[0] != ',' {
			return errors.New("proof hashes are not separated by commas")
		}
		rest = rest[1:]
	}
	if len(rest) < 46 || rest[0] != '"' || rest[45] != '"' {
		return fmt.Errorf("proof hash %d is not a quoted base64 SHA-256 hash", n)
	}
	h, err := checkpoints.ParseHash(string(rest[1:45]))
	if err != nil {
		return fmt.Errorf("proof hash %d: %v", n, err)
	}
	if len(r.e.proof) == checkpoints.MaxProofHashes {
		return fmt.Errorf("proof has more than %d hashes", checkpoints.MaxProofHashes)
	}
	r.e.proof = append(r.e.proof, h[:])
	r.rest = rest[46:]
	return nil
}

func (r *eventLineReader) end() error {
	if string(r.rest) != "}" {
		return fmt.Errorf("unexpected %q where the event line should end with }", abbreviate(string(r.rest)))
	}
	return nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// KeyPolicy is the policy of one log key and no witnesses: a checkpoint
// needs only the log's signature.
func KeyPolicy(vkey string) (*Policy, error) {
	if _, err := LogVerifier(vkey); err != nil {
		return nil, err
	}
	return ParsePolicy([]byte("log " + strings.TrimSpace(vkey) + "\nquorum none\n"))
}
