package delta

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Chain rules (Execution Control §14.2–14.5, ADR-0023).
//
// A list of deltas is a valid chain when, in order,
//   - every delta Validates (its fields, and its delta_hash recomputes);
//   - the first delta's parent_hash is ZeroHash and every later delta's
//     parent_hash is the delta_hash of the one before it;
//   - every delta has the first delta's session_id;
//   - no delta_id and no turn_id appears twice;
//   - every change is consistent with the files the deltas before it leave:
//     a create is of a path that does not exist, a modify or a delete of one
//     that does (a delete removes it, so it may be created again later).
//
// Chain.Append checks every rule, the last included, as each delta comes,
// so a delta that does not fit the state is refused when it is appended.
// StateAt and Rollback verify the whole list they are given (§14.4) in the
// same way before they answer, so they never read a chain that breaks a
// rule. Whoever holds a valid chain can therefore always reconstruct the
// files after any turn.
//
// Verification has no recovery (§14.5): the first failure makes the whole
// chain invalid, and nothing after it is looked at or skipped over.

var (
	// ErrBrokenChain is wrapped by every error about a chain that breaks
	// one of the rules above.
	ErrBrokenChain = errors.New("broken delta chain")
	// ErrTurnNotFound is wrapped by StateAt's and Rollback's error for a
	// turn that is not in the chain.
	ErrTurnNotFound = errors.New("turn not in the delta chain")
)

// Chain builds a valid chain one delta at a time. The zero Chain has no
// session and refuses every delta; use NewChain.
type Chain struct {
	session string
	deltas  []Delta
	ids     map[string]bool
	turns   map[string]bool
	// files is the state after the last delta: path → content hash.
	files map[string]string
}

// NewChain returns an empty chain for one session. A session id that
// ValidIdentifier refuses gives a chain that refuses every delta.
func NewChain(session string) *Chain {
	return &Chain{session: session, ids: map[string]bool{}, turns: map[string]bool{}, files: map[string]string{}}
}

// Head returns the delta_hash of the last delta, or ZeroHash when the chain
// is empty: the parent_hash the next delta must carry.
func (c *Chain) Head() string {
	if len(c.deltas) == 0 {
		return ZeroHash
	}
	return c.deltas[len(c.deltas)-1].DeltaHash
}

// Files returns a copy of the files after the last delta: path → content
// hash.
func (c *Chain) Files() map[string]string { return maps.Clone(c.files) }

// Append adds d at the end of the chain if it keeps the chain valid (see
// the rules above). Otherwise it returns an error wrapping ErrBrokenChain
// that names d's position (from 1), its delta_id and the rule, and the
// chain is left exactly as it was. The chain keeps its own copy of d.
func (c *Chain) Append(d Delta) error {
	pos := len(c.deltas) + 1
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: position %d (delta %s): %s", ErrBrokenChain, pos, d.DeltaID, fmt.Sprintf(format, args...))
	}
	if err := d.Validate(); err != nil {
		return fail("%v", err)
	}
	if d.SessionID != c.session {
		return fail("session_id %q is not the chain's session %q", d.SessionID, c.session)
	}
	if head := c.Head(); d.ParentHash != head {
		if pos == 1 {
			return fail("parent_hash %s is not ZeroHash, as the first delta's must be", d.ParentHash)
		}
		return fail("parent_hash %s is not the delta_hash of position %d (%s)", d.ParentHash, pos-1, head)
	}
	if c.ids[d.DeltaID] {
		return fail("delta_id appears twice in the chain")
	}
	if c.turns[d.TurnID] {
		return fail("turn_id %q appears twice in the chain", d.TurnID)
	}
	if d.Sealed != nil && d.Changes == nil {
		return fmt.Errorf("%w: position %d (delta %s): its changes were erased when its retention ended (%s)", ErrErased, pos, d.DeltaID, d.Sealed.RetainUntil)
	}
	if err := ApplyChanges(c.files, d.Changes); err != nil {
		return fail("%v", err)
	}
	c.ids[d.DeltaID] = true
	c.turns[d.TurnID] = true
	c.deltas = append(c.deltas, cloneDelta(d))
	return nil
}

// ApplyChanges applies a delta's changes to files (path → content hash)
// if every one fits them: a create of a path that does not exist, a modify
// or delete of one that does. Otherwise it names the first change that
// does not fit and leaves files as they were.
func ApplyChanges(files map[string]string, changes []Change) error {
	for i, ch := range changes {
		_, exists := files[ch.Path]
		switch {
		case ch.Operation == OpCreate && exists:
			return fmt.Errorf("change %d: create of %q, which already exists", i+1, ch.Path)
		case ch.Operation != OpCreate && !exists:
			return fmt.Errorf("change %d: %s of %q, which does not exist", i+1, ch.Operation, ch.Path)
		}
	}
	for _, ch := range changes {
		if ch.Operation == OpDelete {
			delete(files, ch.Path)
		} else {
			files[ch.Path] = ch.ContentHash
		}
	}
	return nil
}

func cloneDelta(d Delta) Delta {
	d.Changes = slices.Clone(d.Changes)
	return d
}

// replay checks that deltas form one valid chain (§14.4; the rules above),
// the session being the first delta's, by appending each to a new chain. It
// returns the files after turnID (nil if turnID is "" or not found) and
// after the last delta; an empty list is a valid chain with no files. The
// error is the first failure, wrapping ErrBrokenChain and naming the
// position, the delta_id and the rule.
func replay(deltas []Delta, turnID string) (at, head map[string]string, err error) {
	if len(deltas) == 0 {
		return nil, map[string]string{}, nil
	}
	c := NewChain(deltas[0].SessionID)
	for _, d := range deltas {
		if err := c.Append(d); err != nil {
			return nil, nil, err
		}
		if turnID != "" && d.TurnID == turnID {
			at = c.Files()
		}
	}
	return at, c.files, nil
}

// StateAt returns the files (path → content hash) as they are after the
// turn turnID of a valid chain. It verifies the whole chain first, and
// refuses a turn that is not in it (ErrTurnNotFound).
func StateAt(deltas []Delta, turnID string) (map[string]string, error) {
	at, _, err := replay(deltas, turnID)
	if err != nil {
		return nil, err
	}
	if at == nil {
		return nil, fmt.Errorf("%w: turn %q", ErrTurnNotFound, turnID)
	}
	return at, nil
}

// Rollback returns the changes that take the files after the chain's last
// delta back to the files after turnID (ADR-0023 "precise rollback to any
// point"): a file created since is deleted, a file modified since is
// modified back to its content hash then, and a file deleted since is
// created again with it. The changes are sorted by path (byte order), so the answer is
// the same on every run; none when turnID is the last turn. Applied as one
// more delta they pass Chain.Append's state checks; there may be more than
// MaxChanges of them, in which case the caller splits them over several
// deltas. It fails as StateAt does.
func Rollback(deltas []Delta, turnID string) ([]Change, error) {
	at, head, err := replay(deltas, turnID)
	if err != nil {
		return nil, err
	}
	if at == nil {
		return nil, fmt.Errorf("%w: turn %q", ErrTurnNotFound, turnID)
	}
	union := maps.Clone(head)
	maps.Copy(union, at)
	paths := slices.Sorted(maps.Keys(union)) // byte order
	changes := []Change{}
	for _, p := range paths {
		now, inHead := head[p]
		then, inAt := at[p]
		switch {
		case inHead && !inAt:
			changes = append(changes, Change{Path: p, Operation: OpDelete})
		case !inHead && inAt:
			changes = append(changes, Change{Path: p, Operation: OpCreate, ContentHash: then})
		case now != then:
			changes = append(changes, Change{Path: p, Operation: OpModify, ContentHash: then})
		}
	}
	return changes, nil
}
