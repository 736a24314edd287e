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

// check validates a selection's own values.
func (s *selection) check() error {
	if len(s.Actor) > maxSelectionActor || s.Actor != "" && !isActorID(s.Actor) {
		return fmt.Errorf("selection actor %q is not an actor id", abbreviate(s.Actor))
	}
	if s.Session != "" && !isIdentifier(s.Session) {
		return fmt.Errorf("selection session %q is not a session id", abbreviate(s.Session))
	}
	if len(s.Kind) > maxSelectionKind || s.Kind != "" && !isKind(s.Kind) {
		return fmt.Errorf("selection kind %q is not an event kind", abbreviate(s.Kind))
	}
	if s.From != nil && s.To != nil && *s.From >= *s.To {
		return fmt.Errorf("selection from %d is not below to %d", *s.From, *s.To)
	}
	var err error
	if s.Since != "" {
		if s.since, err = parseTime(s.Since); err != nil {
			return fmt.Errorf("selection since: %v", err)
		}
	}
	if s.Until != "" {
		if s.until, err = parseTime(s.Until); err != nil {
			return fmt.Errorf("selection until: %v", err)
		}
	}
	if s.Since != "" && s.Until != "" && !s.since.Before(s.until) {
		return fmt.Errorf("selection since %s is not before until %s", s.Since, s.Until)
	}
	return nil
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
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UTC().Format(time.RFC3339Nano) != s {
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
func parseEventLine(line []byte, withProof bool, buf []byte) (e bundleEvent, _ []byte, _ error) {
	if !bytes.HasPrefix(line, eventLinePrefix) {
		return e, buf, fmt.Errorf("an event line starts with %s, this one with %q", eventLinePrefix, abbreviate(string(line[:min(len(line), len(eventLinePrefix))])))
	}
	rest := line[len(eventLinePrefix):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return e, buf, errors.New("the entry's string does not end")
	}
	b64 := rest[:end]
	if len(b64)%4 != 0 || len(b64) == 0 {
		return e, buf, fmt.Errorf("entry is not canonical base64 (%d characters, not a positive multiple of 4)", len(b64))
	}
	if bytes.IndexByte(b64, '\r') >= 0 || bytes.IndexByte(b64, '\n') >= 0 {
		return e, buf, errors.New("entry is not canonical base64 (line break)")
	}
	if need := 1 + base64.StdEncoding.DecodedLen(len(b64)); cap(buf) < need {
		buf = make([]byte, need, max(need, 1024))
	}
	buf = buf[:cap(buf)]
	buf[0] = rfc6962.RFC6962LeafHashPrefix
	n, err := base64.StdEncoding.Strict().Decode(buf[1:], b64)
	if err != nil {
		return e, buf, fmt.Errorf("entry is not canonical base64: %v", err)
	}
	e.entry = buf[1 : 1+n]
	if len(e.entry) > MaxEntrySize {
		return e, buf, fmt.Errorf("entry is %d bytes, more than %d", len(e.entry), MaxEntrySize)
	}
	rest = rest[end:]
	if !bytes.HasPrefix(rest, eventLineIndex) {
		return e, buf, fmt.Errorf("after the entry comes %s, not %q", eventLineIndex, abbreviate(string(rest[:min(len(rest), len(eventLineIndex))])))
	}
	rest = rest[len(eventLineIndex):]
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if e.index, err = checkpoints.ParseDecimal(string(rest[:i])); err != nil {
		return e, buf, fmt.Errorf("index: %v", err)
	}
	rest = rest[i:]
	if bytes.HasPrefix(rest, eventLineKeyEvent) {
		if !withProof {
			return e, buf, errors.New("a range bundle has no key_event lines: it holds every entry of its range")
		}
		e.keyEvent, rest = true, rest[len(eventLineKeyEvent):]
	}
	if bytes.HasPrefix(rest, eventLineOpened) {
		if e.keyEvent {
			return e, buf, errors.New("a key_event line opens no sealed payload")
		}
		if e.opened, rest, err = parseOpened(rest[len(eventLineOpened):]); err != nil {
			return e, buf, err
		}
	}
	if withProof {
		if !bytes.HasPrefix(rest, eventLineProof) {
			return e, buf, fmt.Errorf("an event line of an inclusion bundle has %s after its index", eventLineProof)
		}
		rest = rest[len(eventLineProof):]
		for len(rest) > 0 && rest[0] != ']' {
			if len(e.proof) > 0 {
				if rest[0] != ',' {
					return e, buf, errors.New("proof hashes are not separated by commas")
				}
				rest = rest[1:]
			}
			if len(rest) < 46 || rest[0] != '"' || rest[45] != '"' {
				return e, buf, fmt.Errorf("proof hash %d is not a quoted base64 SHA-256 hash", len(e.proof)+1)
			}
			h, err := checkpoints.ParseHash(string(rest[1:45]))
			if err != nil {
				return e, buf, fmt.Errorf("proof hash %d: %v", len(e.proof)+1, err)
			}
			if len(e.proof) == checkpoints.MaxProofHashes {
				return e, buf, fmt.Errorf("proof has more than %d hashes", checkpoints.MaxProofHashes)
			}
			e.proof = append(e.proof, h[:])
			rest = rest[46:]
		}
		if len(rest) == 0 {
			return e, buf, errors.New("the proof list does not end")
		}
		rest = rest[1:]
	}
	if string(rest) != "}" {
		return e, buf, fmt.Errorf("unexpected %q where the event line should end with }", abbreviate(string(rest)))
	}
	return e, buf, nil
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
