package session

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// Coordination of a session's writers: intent locks and the causal clock
// under SERIALIZABLE (§11.1), acknowledgements under STRONG (§10.4).
//
// The kernel is one sequencer, so the log already puts every write of a
// session in one order that every participant sees. What SERIALIZABLE adds
// is that no two participants write the same path unawares: a participant
// takes an intent lock on a path (a file, or a folder and all below it)
// before it writes there, and while it holds it a write by anyone else to
// that path is refused until the lock is released — by its holder, by the
// session's owner, or by the holder leaving the session or the session
// ending. Clock is the session's vector clock: how many writes (deltas,
// locks, releases) each participant has made, so the order the log gives
// is also told per writer.
//
// What STRONG adds is consensus on the state a change builds on: a change
// of the session's files is accepted only when every active participant
// has acknowledged the files as they are (the chain head), so no
// participant's view is ever behind a change it did not see. The author
// of a change acknowledges it by making it.

// MaxLocks bounds the intent locks a session holds at once.
const MaxLocks = 1024

// Errors of coordination. Each refusal wraps one and names the rule.
var (
	ErrLocked     = errors.New("path is under another participant's intent lock")
	ErrNotLocked  = errors.New("no such intent lock")
	ErrUnacked    = errors.New("not every participant has acknowledged the session's state")
	ErrStaleAck   = errors.New("acknowledgement of a state that is not the session's")
	ErrCoordinate = errors.New("the session's isolation or consistency mode does not use this")
)

// Lock is one intent lock: its holder and the log index that took it.
type Lock struct {
	Holder string `json:"holder"`
	Index  uint64 `json:"index"`
}

// CleanPath checks a path of the session's working directory as a lock
// or a write names it: relative, clean, no empty segment, no "..", no
// backslash or control character, at most 4096 bytes. It returns the path
// as given (which must already be clean).
func CleanPath(p string) (string, error) {
	switch {
	case p == "" || len(p) > 4096:
		return "", fmt.Errorf("%w: path must be 1 to 4096 bytes", ErrInvalid)
	case strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return "", fmt.Errorf("%w: path %q must be relative and clean, inside the session's folder", ErrInvalid, clipString(p))
	case strings.ContainsAny(p, "\\%") || strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "", fmt.Errorf("%w: path %q holds a backslash, percent sign or control character", ErrInvalid, clipString(p))
	}
	return p, nil
}

// covers reports whether a lock on held covers a write of p: the same
// path, or p below held.
func covers(held, p string) bool { return held == p || strings.HasPrefix(p, held+"/") }

// LockedAgainst returns the lock, and its path, that keeps agent from
// writing p: one held by another participant on p or on a folder above it.
// Only SERIALIZABLE sessions hold locks.
func (s *Session) LockedAgainst(agent, p string) (string, *Lock) {
	for held, l := range s.Locks {
		if l.Holder != agent && covers(held, p) {
			return held, l
		}
	}
	return "", nil
}

// TakeLock records agent's intent lock on p at log index. It MUST refuse,
// changing nothing: a session that is not SERIALIZABLE or not ACTIVE, an
// agent that is not an active participant, an invalid path, a lock that
// overlaps one held by another participant (above or below p), a path the
// agent already holds, and more than MaxLocks locks.
func (s *Session) TakeLock(agent, p string, index uint64) error {
	if err := s.lockable(agent); err != nil {
		return err
	}
	if _, err := CleanPath(p); err != nil {
		return err
	}
	for held, l := range s.Locks {
		switch {
		case held == p && l.Holder == agent:
			return fmt.Errorf("%w: %s already holds the intent lock on %s in session %s", ErrInvalid, agent, p, s.ID)
		case l.Holder != agent && (covers(held, p) || covers(p, held)):
			return fmt.Errorf("%w: %s in session %s: %s holds an intent lock on %s (index %d)", ErrLocked, p, s.ID, l.Holder, held, l.Index)
		}
	}
	if len(s.Locks) >= MaxLocks {
		return fmt.Errorf("%w: session %s holds %d intent locks (limit %d)", ErrInvalid, s.ID, len(s.Locks), MaxLocks)
	}
	if s.Locks == nil {
		s.Locks = map[string]*Lock{}
	}
	s.Locks[p] = &Lock{Holder: agent, Index: index}
	s.tick(agent)
	return nil
}

// ReleaseLock ends the intent lock on p. by must hold it, unless owner
// (the session's creator or root, who may release any). It MUST refuse a
// path without a lock and a release by anyone else.
func (s *Session) ReleaseLock(by, p string, owner bool) error {
	l, ok := s.Locks[p]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q in session %s", ErrNotLocked, clipString(p), s.ID)
	case l.Holder != by && !owner:
		return fmt.Errorf("%w: the intent lock on %s in session %s is %s's; only it or the session's owner releases it", ErrLocked, p, s.ID, l.Holder)
	}
	delete(s.Locks, p)
	if len(s.Locks) == 0 {
		s.Locks = nil
	}
	if s.IsActiveParticipant(by) {
		s.tick(by)
	}
	return nil
}

func (s *Session) lockable(agent string) error {
	return s.coordinating(agent, s.Config.Isolation == Serializable,
		fmt.Sprintf("has isolation %s; intent locks are taken under SERIALIZABLE (§11.1)", s.Config.Isolation), "locks are taken")
}

// coordinating checks that agent may take part now in a coordination the
// session's configuration uses (when it does not, notUsed says why): the
// session is ACTIVE and agent an active participant.
func (s *Session) coordinating(agent string, used bool, notUsed, what string) error {
	switch {
	case !used:
		return fmt.Errorf("%w: session %s %s", ErrCoordinate, s.ID, notUsed)
	case !s.State.AcceptsActions():
		return fmt.Errorf("%w: session %s is %s; %s while it is ACTIVE", ErrState, s.ID, s.State, what)
	case !s.IsActiveParticipant(agent):
		return fmt.Errorf("%w: %q in session %s", ErrNotParticipant, clipString(agent), s.ID)
	}
	return nil
}

// dropLocksOf releases every lock agent holds (it left the session).
func (s *Session) dropLocksOf(agent string) {
	maps.DeleteFunc(s.Locks, func(_ string, l *Lock) bool { return l.Holder == agent })
	if len(s.Locks) == 0 {
		s.Locks = nil
	}
}

// tick counts one write of agent in the session's vector clock
// (SERIALIZABLE sessions only).
func (s *Session) tick(agent string) {
	if s.Config.Isolation != Serializable {
		return
	}
	if s.Clock == nil {
		s.Clock = map[string]uint64{}
	}
	s.Clock[agent]++
}

// Acknowledge records that agent has seen the session's files as they are
// at head, the session's chain head now. It MUST refuse a session that is
// not STRONG or not ACTIVE, an agent that is not an active participant,
// and a head that is not now.
func (s *Session) Acknowledge(agent, head, now string) error {
	if err := s.coordinating(agent, s.Config.ConsistencyMode == Strong,
		fmt.Sprintf("is %s; acknowledgements are given under STRONG (§10.4)", s.Config.ConsistencyMode), "acknowledgements are given"); err != nil {
		return err
	}
	if head != now {
		return fmt.Errorf("%w: %s acknowledges %s in session %s, whose head is %s", ErrStaleAck, agent, clipString(head), s.ID, now)
	}
	if s.Acks == nil {
		s.Acks = map[string]string{}
	}
	s.Acks[agent] = head
	return nil
}

// Unacknowledged lists, sorted, the active participants that have not
// acknowledged head, for a change on top of head in a STRONG session —
// its author among them: the kernel names the parent of a change, so
// making one does not show its author has seen it. Nil in an EVENTUAL
// session. The empty state (no change yet, zero) needs no acknowledgement.
func (s *Session) Unacknowledged(head, zero string) []string {
	if s.Config.ConsistencyMode != Strong || head == zero {
		return nil
	}
	var missing []string
	for id, p := range s.Participants {
		if p.IsActive && s.Acks[id] != head {
			missing = append(missing, id)
		}
	}
	slices.Sort(missing)
	return missing
}

// Changed records a change of the session's files by author, now at head:
// the author has acknowledged it by making it (STRONG), and it is one
// more write in the vector clock (SERIALIZABLE).
func (s *Session) Changed(author, head string) {
	if s.Config.ConsistencyMode == Strong {
		if s.Acks == nil {
			s.Acks = map[string]string{}
		}
		s.Acks[author] = head
	}
	s.tick(author)
}
