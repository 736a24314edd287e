package session

// State is the lifecycle state of a session (§10.1).
type State string

// The session states of §10.1.
const (
	Created     State = "CREATED"
	Handshaking State = "HANDSHAKING"
	Active      State = "ACTIVE"
	Terminating State = "TERMINATING"
	Archived    State = "ARCHIVED"
)

// Valid reports whether s is one of the five states of §10.1.
func (s State) Valid() bool {
	switch s {
	case Created, Handshaking, Active, Terminating, Archived:
		return true
	}
	return false
}

// AcceptsParticipants reports whether a session in state s accepts joins:
// HANDSHAKING only (see the package comment).
func (s State) AcceptsParticipants() bool { return s == Handshaking }

// AcceptsActions reports whether a session in state s executes actions:
// ACTIVE only.
func (s State) AcceptsActions() bool { return s == Active }

// CanTransition reports whether the §10.1 machine allows from → to:
// CREATED→HANDSHAKING, HANDSHAKING→ACTIVE, CREATED/HANDSHAKING/ACTIVE→
// TERMINATING and TERMINATING→ARCHIVED. Nothing else, no self-loops, and
// nothing leaves ARCHIVED.
func CanTransition(from, to State) bool {
	switch from {
	case Created:
		return to == Handshaking || to == Terminating
	case Handshaking:
		return to == Active || to == Terminating
	case Active:
		return to == Terminating
	case Terminating:
		return to == Archived
	}
	return false
}

// ConsistencyMode is a session's consistency mode (§10.4).
type ConsistencyMode string

// The consistency modes of §10.4.
const (
	Strong   ConsistencyMode = "STRONG"
	Eventual ConsistencyMode = "EVENTUAL"
)

// Valid reports whether m is STRONG or EVENTUAL.
func (m ConsistencyMode) Valid() bool { return m == Strong || m == Eventual }

// Isolation is a session's isolation level (§11.1).
type Isolation string

// The isolation levels of §11.1.
const (
	Snapshot      Isolation = "SNAPSHOT"
	ReadCommitted Isolation = "READ_COMMITTED"
	Serializable  Isolation = "SERIALIZABLE"
)

// Valid reports whether i is SNAPSHOT, READ_COMMITTED or SERIALIZABLE.
func (i Isolation) Valid() bool {
	return i == Snapshot || i == ReadCommitted || i == Serializable
}
