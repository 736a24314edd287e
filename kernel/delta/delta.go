// Package delta is ADR-0023's SemanticDelta: the file changes of one agent
// turn in a session, hash-chained to the turn before.
//
// The byte contract (stated again, with known answers, in
// testvectors/FORMATS.md):
//
//	delta_hash = lower-hex( SHA-256( parent_raw || JCS(delta without delta_hash) ) )
//
// where parent_raw is the 32 raw bytes of the previous delta's hash (32
// zero bytes for the first delta of a chain, whose parent_hash is then 64
// '0' digits) and JCS is RFC 8785 canonical JSON of every other field of
// the delta, parent_hash included. A chain is valid only if every delta's
// hash recomputes and every parent_hash is the hash before it; a chain with
// one bad link is compromised as a whole (Execution Control §14.5).
package delta

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/annal-dev/annal/kernel/ring"
)

// ZeroHash is the parent_hash of the first delta of a chain.
var ZeroHash = strings.Repeat("0", 64)

// Operations on a file.
const (
	OpCreate = "create"
	OpModify = "modify"
	OpDelete = "delete"
)

// Limits of one delta, so that it fits in one log entry.
const (
	MaxChanges  = 256
	MaxPathSize = 1024
)

// Change is one file operation of a turn (ADR-0023's VFSChange).
type Change struct {
	Path      string `json:"path"`
	Operation string `json:"operation"`
	// ContentHash is "sha256:<64 hex>" of the new content; absent for delete.
	ContentHash string `json:"content_hash,omitempty"`
}

// Delta is one agent turn's changes in a session: the changes themselves,
// or (retention.go) Sealed, a commitment to them kept in their place.
type Delta struct {
	DeltaID   string   `json:"delta_id"`
	TurnID    string   `json:"turn_id"`
	SessionID string   `json:"session_id"`
	AgentDID  string   `json:"agent_did"`
	Timestamp string   `json:"timestamp"`
	Changes   []Change `json:"changes,omitempty"`
	Sealed    *Sealed  `json:"sealed,omitempty"`
	// ParentHash is the previous delta's DeltaHash, or ZeroHash.
	ParentHash string `json:"parent_hash"`
	DeltaHash  string `json:"delta_hash"`
}

var (
	uuidPattern  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	actorPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	hashPattern  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	oidPattern   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// ValidIdentifier reports whether s is a session or turn id: Execution
// Control §17.1's pattern, at most 256 bytes (ring.IsIdentifier), so
// "abc\n" is refused.
func ValidIdentifier(s string) bool { return ring.IsIdentifier(s) }

// ValidHash reports whether s is a delta hash: 64 lower-case hex digits.
func ValidHash(s string) bool { return hashPattern.MatchString(s) }

// Hash computes the delta's hash from its other fields.
func (d *Delta) Hash() (string, error) {
	parent, err := hex.DecodeString(d.ParentHash)
	if err != nil || len(parent) != sha256.Size || !hashPattern.MatchString(d.ParentHash) {
		return "", fmt.Errorf("delta %s: parent_hash %q is not 64 lower-case hex digits", d.DeltaID, d.ParentHash)
	}
	c := *d
	c.DeltaHash = ""
	if c.Sealed != nil {
		c.Changes = nil // an opened delta: the hash covers the commitment
	}
	raw, err := json.Marshal(struct {
		DeltaID    string   `json:"delta_id"`
		TurnID     string   `json:"turn_id"`
		SessionID  string   `json:"session_id"`
		AgentDID   string   `json:"agent_did"`
		Timestamp  string   `json:"timestamp"`
		Changes    []Change `json:"changes,omitempty"`
		Sealed     *Sealed  `json:"sealed,omitempty"`
		ParentHash string   `json:"parent_hash"`
	}{c.DeltaID, c.TurnID, c.SessionID, c.AgentDID, c.Timestamp, c.Changes, c.Sealed, c.ParentHash})
	if err != nil {
		return "", err
	}
	canonical, err := jcs.Transform(raw)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(parent)
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Seal sets DeltaHash after checking every other field.
func (d *Delta) Seal() error {
	if err := d.validateFields(); err != nil {
		return err
	}
	h, err := d.Hash()
	if err != nil {
		return err
	}
	d.DeltaHash = h
	return nil
}

// Validate checks every field and that DeltaHash is the hash of the others.
func (d *Delta) Validate() error {
	if err := d.validateFields(); err != nil {
		return err
	}
	h, err := d.Hash()
	if err != nil {
		return err
	}
	if h != d.DeltaHash {
		return fmt.Errorf("delta %s: delta_hash %s is not the hash of its fields (%s)", d.DeltaID, d.DeltaHash, h)
	}
	return nil
}

func (d *Delta) validateFields() error {
	switch {
	case !uuidPattern.MatchString(d.DeltaID):
		return fmt.Errorf("delta_id %q is not a lower-case UUID", d.DeltaID)
	case !ValidIdentifier(d.TurnID):
		return fmt.Errorf("delta %s: turn_id %q does not match ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$ (at most 256)", d.DeltaID, d.TurnID)
	case !ValidIdentifier(d.SessionID):
		return fmt.Errorf("delta %s: session_id %q does not match ^[a-zA-Z0-9]([a-zA-Z0-9._:-]*[a-zA-Z0-9])?$ (at most 256)", d.DeltaID, d.SessionID)
	case !actorPattern.MatchString(d.AgentDID):
		return fmt.Errorf("delta %s: agent_did %q is not an actor id", d.DeltaID, d.AgentDID)
	case !hashPattern.MatchString(d.ParentHash):
		return fmt.Errorf("delta %s: parent_hash %q is not 64 lower-case hex digits", d.DeltaID, d.ParentHash)
	case d.DeltaHash != "" && !hashPattern.MatchString(d.DeltaHash):
		return fmt.Errorf("delta %s: delta_hash %q is not 64 lower-case hex digits", d.DeltaID, d.DeltaHash)
	}
	t, err := time.Parse(time.RFC3339Nano, d.Timestamp)
	if err != nil || t.UTC().Format(time.RFC3339Nano) != d.Timestamp {
		return fmt.Errorf("delta %s: timestamp %q is not RFC 3339 UTC in canonical form", d.DeltaID, d.Timestamp)
	}
	if d.Sealed == nil {
		return d.validateChanges()
	}
	if err := d.validateSealed(); err != nil {
		return err
	}
	if d.Changes != nil {
		return d.validateChanges() // opened
	}
	return nil
}

// validateChanges checks the list of changes: 1 to MaxChanges, each path
// valid and changed once, each operation with what it carries.
func (d *Delta) validateChanges() error {
	if len(d.Changes) == 0 || len(d.Changes) > MaxChanges {
		return fmt.Errorf("delta %s: %d changes; a delta has 1 to %d", d.DeltaID, len(d.Changes), MaxChanges)
	}
	seen := make(map[string]bool, len(d.Changes))
	for i, c := range d.Changes {
		if err := ValidatePath(c.Path); err != nil {
			return fmt.Errorf("delta %s: change %d: %v", d.DeltaID, i+1, err)
		}
		if seen[c.Path] {
			return fmt.Errorf("delta %s: change %d: path %q changes twice in one turn", d.DeltaID, i+1, c.Path)
		}
		seen[c.Path] = true
		if err := d.validateOperation(i+1, c); err != nil {
			return err
		}
	}
	return nil
}

// validateOperation checks change n's operation: a create or a modify
// names the new content, a delete names none.
func (d *Delta) validateOperation(n int, c Change) error {
	switch c.Operation {
	case OpCreate, OpModify:
		if !oidPattern.MatchString(c.ContentHash) {
			return fmt.Errorf("delta %s: change %d (%s %s): content_hash must be \"sha256:<64 lower-case hex>\"", d.DeltaID, n, c.Operation, c.Path)
		}
	case OpDelete:
		if c.ContentHash != "" {
			return fmt.Errorf("delta %s: change %d (delete %s): a delete carries no content_hash", d.DeltaID, n, c.Path)
		}
	default:
		return fmt.Errorf("delta %s: change %d: operation %q is not create, modify or delete", d.DeltaID, n, c.Operation)
	}
	return nil
}

// ValidatePath checks a changed file's path: relative, '/'-separated,
// non-empty segments other than "." and "..", printable UTF-8 without '\',
// at most MaxPathSize bytes. So a path has one spelling and never escapes.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path is empty")
	case len(p) > MaxPathSize:
		return fmt.Errorf("path is %d bytes, more than %d", len(p), MaxPathSize)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q is not UTF-8", p)
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return fmt.Errorf("path %q has an empty segment (or is absolute)", p)
		case ".", "..":
			return fmt.Errorf("path %q has a %q segment", p, seg)
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f || r == '\\' {
				return fmt.Errorf("path %q contains a control character or backslash", p)
			}
		}
	}
	return nil
}
