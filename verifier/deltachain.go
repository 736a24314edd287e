package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
)

// DeltaKind is the event kind of an ADR-0023 SemanticDelta.
const DeltaKind = "session.delta"

// ZeroDeltaHash is the parent_hash of the first delta of a chain.
var ZeroDeltaHash = strings.Repeat("0", 64)

// deltaMembers are the members of a delta, each with whether it is a string
// (changes is an array, sealed an object). delta_hash covers all but
// itself. A delta whose changes are kept for a time only (§14.7) carries
// sealed, the commitment to them, in place of changes: exactly one of the
// two.
var deltaMembers = map[string]bool{
	"agent_did": true, "changes": false, "delta_hash": true, "delta_id": true,
	"parent_hash": true, "session_id": true, "timestamp": true, "turn_id": true,
	"sealed": false,
}

// deltaContent are the members of which a delta has exactly one, with the
// first byte of their JSON.
var deltaContent = map[string]byte{"changes": '[', "sealed": '{'}

// DeltaLink is one verified delta: its own hash recomputes from its members,
// and its session, agent and time are the event's.
type DeltaLink struct {
	ID         string
	Session    string
	ParentHash string
	DeltaHash  string
}

// DeltaHash computes an ADR-0023 delta_hash from a delta object's JSON:
// lower-hex SHA-256 of the 32 raw bytes of parent_hash followed by the RFC
// 8785 encoding of every member but delta_hash. It is written from
// testvectors/FORMATS.md, apart from the kernel's delta package.
func DeltaHash(deltaJSON []byte) (string, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(deltaJSON, &members); err != nil || members == nil {
		return "", fmt.Errorf("delta is not a JSON object")
	}
	var parent string
	if err := json.Unmarshal(members["parent_hash"], &parent); err != nil || !isLowerHex64(parent) {
		return "", fmt.Errorf("delta parent_hash is not 64 lower-case hex digits")
	}
	delete(members, "delta_hash")
	raw, err := json.Marshal(members)
	if err != nil {
		return "", err
	}
	canonical, err := jcs.Transform(raw)
	if err != nil {
		return "", err
	}
	parentRaw, _ := hex.DecodeString(parent)
	h := sha256.New()
	h.Write(parentRaw)
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CheckDeltaEvent checks the delta of a session.delta event on its own: the
// members are exactly the delta's, the string members are strings, the
// hashes are 64 lower-case hex digits, delta_hash recomputes, and
// session_id, agent_did and timestamp are the event's session, actor and
// time. Links between deltas are checked by the bundle verifier.
func CheckDeltaEvent(ev *Event) (*DeltaLink, error) {
	members, err := deltaObject(ev)
	if err != nil {
		return nil, err
	}
	str, err := deltaStrings(ev.ID, members)
	if err != nil {
		return nil, err
	}
	d := &DeltaLink{ID: str["delta_id"], Session: str["session_id"], ParentHash: str["parent_hash"], DeltaHash: str["delta_hash"]}
	if err := d.agrees(ev, str); err != nil {
		return nil, err
	}
	h, err := DeltaHash(ev.delta)
	if err != nil {
		return nil, fmt.Errorf("delta %s: %v", d.ID, err)
	}
	if h != d.DeltaHash {
		return nil, fmt.Errorf("delta %s: delta_hash %s is not the hash of its members, %s", d.ID, d.DeltaHash, h)
	}
	return d, nil
}

// deltaObject is the delta a session.delta event carries, by member.
func deltaObject(ev *Event) (map[string]json.RawMessage, error) {
	if ev.Kind != DeltaKind {
		return nil, fmt.Errorf("event %s is a %s, not a %s", ev.ID, ev.Kind, DeltaKind)
	}
	if !ev.hasSession {
		return nil, fmt.Errorf("%s event %s has no session", DeltaKind, ev.ID)
	}
	if len(ev.delta) == 0 || ev.delta[0] != '{' {
		return nil, fmt.Errorf("%s event %s has no delta object", DeltaKind, ev.ID)
	}
	dec := json.NewDecoder(bytes.NewReader(ev.delta))
	var members map[string]json.RawMessage
	if err := dec.Decode(&members); err != nil {
		return nil, fmt.Errorf("event %s: delta is not a JSON object: %v", ev.ID, err)
	}
	return members, nil
}

// deltaStrings checks that a delta has exactly the members of deltaMembers,
// each string a string and changes an array, and returns the strings.
func deltaStrings(eventID string, members map[string]json.RawMessage) (map[string]string, error) {
	var names []string
	for name := range members {
		names = append(names, name)
	}
	slices.Sort(names)
	str := map[string]string{}
	for _, name := range names {
		isString, known := deltaMembers[name]
		if !known {
			return nil, fmt.Errorf("event %s: delta has the unknown member %q", eventID, name)
		}
		if isString {
			var s string
			if err := json.Unmarshal(members[name], &s); err != nil {
				return nil, fmt.Errorf("event %s: delta %s is not a string", eventID, name)
			}
			str[name] = s
		} else if len(members[name]) == 0 || members[name][0] != deltaContent[name] {
			return nil, fmt.Errorf("event %s: delta %s is not an %s", eventID, name, map[byte]string{'[': "array", '{': "object"}[deltaContent[name]])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(deltaMembers)) { // the same member named every time
		if _, ok := members[name]; !ok && deltaContent[name] == 0 {
			return nil, fmt.Errorf("event %s: delta lacks %q", eventID, name)
		}
	}
	_, changes := members["changes"]
	sealed, isSealed := members["sealed"]
	if changes == isSealed {
		return nil, fmt.Errorf("event %s: delta has changes or sealed (a commitment to them), exactly one", eventID)
	}
	if isSealed {
		if err := checkSealedDelta(sealed, str["delta_id"]); err != nil {
			return nil, fmt.Errorf("event %s: delta sealed: %v", eventID, err)
		}
	}
	return str, nil
}

// checkSealedDelta checks a delta's sealed member: exactly "subject"
// ("delta:" and the delta's id), "commitment" ("sha256:" and 64 lower-case
// hex digits) and "retain_until", all strings.
func checkSealedDelta(raw json.RawMessage, deltaID string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 3 {
		return fmt.Errorf("not an object of subject, commitment and retain_until")
	}
	var subject, commitment, until string
	for name, dst := range map[string]*string{"subject": &subject, "commitment": &commitment, "retain_until": &until} {
		if err := json.Unmarshal(m[name], dst); err != nil {
			return fmt.Errorf("%s is not a string", name)
		}
	}
	if subject != "delta:"+deltaID {
		return fmt.Errorf("subject %q is not \"delta:\" and the delta's id", abbreviate(subject))
	}
	if hex, ok := strings.CutPrefix(commitment, "sha256:"); !ok || !isLowerHex64(hex) {
		return fmt.Errorf("commitment %q is not sha256:<64 lower-case hex>", abbreviate(commitment))
	}
	return nil
}

// agrees checks the link's hashes, and that the delta's session, agent and
// time (in str, its string members) are the event's.
func (d *DeltaLink) agrees(ev *Event, str map[string]string) error {
	switch {
	case !isLowerHex64(d.ParentHash):
		return fmt.Errorf("delta %s: parent_hash %q is not 64 lower-case hex digits", d.ID, abbreviate(d.ParentHash))
	case !isLowerHex64(d.DeltaHash):
		return fmt.Errorf("delta %s: delta_hash %q is not 64 lower-case hex digits", d.ID, abbreviate(d.DeltaHash))
	case d.Session != ev.Session:
		return fmt.Errorf("delta %s: session_id %q is not the event's session %q", d.ID, abbreviate(d.Session), abbreviate(ev.Session))
	case str["agent_did"] != ev.Actor:
		return fmt.Errorf("delta %s: agent_did %q is not the event's actor %q", d.ID, abbreviate(str["agent_did"]), ev.Actor)
	case str["timestamp"] != ev.Time.UTC().Format(time.RFC3339Nano):
		return fmt.Errorf("delta %s: timestamp %q is not the event's time %s", d.ID, abbreviate(str["timestamp"]), ev.Time.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isIdentifier is a session or turn id: ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$, at most 256 bytes.
func isIdentifier(s string) bool {
	if len(s) == 0 || len(s) > 256 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// SessionChain is what a bundle shows of one session's delta chain: its
// deltas in index order, each linked to the one before.
type SessionChain struct {
	Session string `json:"session"`
	Deltas  uint64 `json:"deltas"`
	// Complete: the first delta in the bundle has the zero parent, so the
	// bundle holds the chain from its start. Otherwise it starts mid-chain at
	// FirstParent, which the bundle cannot check.
	Complete    bool   `json:"complete"`
	FirstParent string `json:"first_parent"`
	FirstIndex  uint64 `json:"first_index"`
	LastIndex   uint64 `json:"last_index"`
	// Head is the last delta's hash.
	Head string `json:"head"`
}

// chains links deltas per session, in index order.
type chains struct {
	bySession map[string]*SessionChain
	order     []string
}

func (c *chains) add(index uint64, d *DeltaLink) error {
	if c.bySession == nil {
		c.bySession = map[string]*SessionChain{}
	}
	s := c.bySession[d.Session]
	if s == nil {
		s = &SessionChain{Session: d.Session, Complete: d.ParentHash == ZeroDeltaHash, FirstParent: d.ParentHash, FirstIndex: index}
		c.bySession[d.Session] = s
		c.order = append(c.order, d.Session)
	} else if d.ParentHash != s.Head {
		if d.ParentHash == ZeroDeltaHash {
			return fmt.Errorf("session %s: delta %s at index %d starts a second chain (zero parent_hash) after the delta at index %d", abbreviate(d.Session), d.ID, index, s.LastIndex)
		}
		return fmt.Errorf("session %s: delta %s at index %d: parent_hash %s is not the hash %s of the session's previous delta (index %d)", abbreviate(d.Session), d.ID, index, d.ParentHash, s.Head, s.LastIndex)
	}
	s.Deltas++
	s.LastIndex = index
	s.Head = d.DeltaHash
	return nil
}

func (c *chains) list() []SessionChain {
	out := make([]SessionChain, 0, len(c.order))
	for _, name := range c.order {
		out = append(out, *c.bySession[name])
	}
	return out
}

// VerifyDeltaChain checks a sequence of session.delta event entries, in log
// order, as one chain: each entry a well-formed event, each delta's hash
// recomputing, each parent_hash the previous delta_hash, all of one session;
// with complete, the first parent is the zero hash.
func VerifyDeltaChain(entries [][]byte, complete bool) (*SessionChain, error) {
	var c chains
	for i, e := range entries {
		ev, err := ParseEvent(e)
		if err != nil {
			return nil, wrap(CheckEntry, fmt.Errorf("delta %d: %w", i+1, err))
		}
		d, err := CheckDeltaEvent(ev)
		if err != nil {
			return nil, wrap(CheckDelta, err)
		}
		if err := c.add(uint64(i), d); err != nil {
			return nil, wrap(CheckDelta, err)
		}
	}
	if len(c.order) != 1 {
		return nil, fail(CheckDelta, "%d sessions, a chain is one session's", len(c.order))
	}
	s := c.list()[0]
	if complete && !s.Complete {
		return nil, fail(CheckDelta, "session %s: the first delta's parent_hash is %s, not the zero hash: the chain does not start at its beginning", abbreviate(s.Session), s.FirstParent)
	}
	return &s, nil
}
