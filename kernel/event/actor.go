package event

import (
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"
)

// The kinds of event about actors.
const (
	// KindActorCreated records a new actor and the hash of its credential.
	KindActorCreated Kind = "actor.created"
	// KindActorStatus records a human freezing, unfreezing or terminating an actor.
	KindActorStatus Kind = "actor.status"
)

// ActorKind separates humans from agents (Def. 4.2).
type ActorKind string

// The actor kinds.
const (
	Human ActorKind = "human"
	Agent ActorKind = "agent"
)

// KernelActor is the actor of events the kernel writes on its own (energy
// production, hold timeouts). No credential authenticates as it.
const KernelActor = "kernel"

// ValidActorID reports whether id can name an actor: lower-case letters,
// digits and '-', starting with a letter, at most 64 bytes.
// It is [a-z][a-z0-9-]{0,63}, checked by hand: every event is checked on
// every fold.
func ValidActorID(id string) bool {
	if len(id) == 0 || len(id) > 64 || id[0] < 'a' || id[0] > 'z' {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func validateAgentRef(what, id string) error {
	if !ValidActorID(id) {
		return fmt.Errorf("%s %q is not an actor id", what, id)
	}
	return nil
}

// ActorRecord describes an actor at creation.
type ActorRecord struct {
	ID      string    `json:"id"`
	Kind    ActorKind `json:"kind"`
	Name    string    `json:"name"`
	Purpose string    `json:"purpose,omitempty"`
	Creator string    `json:"creator,omitempty"`
	Expires Instant   `json:"expires,omitzero"`
	// CredentialSHA256 is the hex SHA-256 of the actor's bearer credential.
	// The credential is 256 random bits, so its hash reveals nothing.
	CredentialSHA256 string `json:"credential_sha256"`
	// Grants are the actor's writable targets W(p) (Def. 4.11), declared at
	// creation.
	Grants []Grant `json:"grants,omitempty"`
	// Share is the actor's share of energy production (Def. 4.16).
	Share uint64 `json:"share,omitempty"`
	// Energy is what the creator gave the new actor from its own balance.
	Energy uint64 `json:"energy,omitempty"`
	// SigningKey is the actor's signing key from creation (KeyChange).
	SigningKey string `json:"signing_key,omitempty"`
	// RequireSigned: the actor's requests must be signed.
	RequireSigned bool `json:"require_signed,omitempty"`
	// SealPayloads: the actor's action payloads are sealed (sealed.go).
	SealPayloads bool `json:"seal_payloads,omitempty"`
}

var hexHashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// check checks the actor an event creates; genesis creates the event's own
// actor, a human.
func (a *ActorRecord) check(e *Event) error {
	if err := a.validate(); err != nil {
		return err
	}
	if e.Kind == KindGenesis && (a.Kind != Human || a.ID != e.Actor) {
		return errors.New("genesis must create its own actor, a human")
	}
	return nil
}

func (a *ActorRecord) validate() error {
	if !ValidActorID(a.ID) {
		return fmt.Errorf("actor id %q is not valid (lower-case letters, digits, '-', at most 64)", a.ID)
	}
	if a.Kind != Human && a.Kind != Agent {
		return fmt.Errorf("actor %s: kind %q is neither human nor agent", a.ID, a.Kind)
	}
	if err := a.checkDescription(); err != nil {
		return err
	}
	if err := a.checkLineage(); err != nil {
		return err
	}
	if err := validateTime("actor "+a.ID+" expiry", a.Expires); err != nil {
		return err
	}
	if err := validateGrants("actor "+a.ID, a.Grants); err != nil {
		return err
	}
	if a.Share > MaxEnergy || a.Energy > MaxEnergy {
		return fmt.Errorf("actor %s: share and energy must be at most 2^53", a.ID)
	}
	if a.SigningKey != "" {
		if _, err := ParseSigningKey(a.SigningKey); err != nil {
			return fmt.Errorf("actor %s: %w", a.ID, err)
		}
	}
	if !hexHashPattern.MatchString(a.CredentialSHA256) {
		return fmt.Errorf("actor %s: credential_sha256 is not 64 lower-case hex digits", a.ID)
	}
	return nil
}

// checkDescription checks the name and purpose people read.
func (a *ActorRecord) checkDescription() error {
	if a.Name == "" || len(a.Name) > 256 {
		return fmt.Errorf("actor %s: name must be 1 to 256 bytes", a.ID)
	}
	if !utf8.ValidString(a.Name) || !utf8.ValidString(a.Purpose) {
		return fmt.Errorf("actor %s: name and purpose must be UTF-8", a.ID)
	}
	if len(a.Purpose) > 4096 {
		return fmt.Errorf("actor %s: purpose is longer than 4096 bytes", a.ID)
	}
	return nil
}

// checkLineage checks who created the actor: an agent names its creator
// and why it was created.
func (a *ActorRecord) checkLineage() error {
	if a.Kind == Agent && (a.Creator == "" || a.Purpose == "") {
		return fmt.Errorf("agent %s must declare its creator and purpose", a.ID)
	}
	if a.Creator != "" && !ValidActorID(a.Creator) {
		return fmt.Errorf("actor %s: creator %q is not a valid actor id", a.ID, a.Creator)
	}
	return nil
}

// Actor statuses. Terminated is final.
const (
	StatusActive     = "active"
	StatusFrozen     = "frozen"
	StatusTerminated = "terminated"
)

// StatusChange is carried by actor.status.
type StatusChange struct {
	Actor  string `json:"actor"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func (s *StatusChange) check(*Event) error {
	if !ValidActorID(s.Actor) {
		return fmt.Errorf("status change: actor %q is not a valid actor id", s.Actor)
	}
	switch s.Status {
	case StatusActive, StatusFrozen, StatusTerminated:
	default:
		return fmt.Errorf("status %q is not active, frozen or terminated", s.Status)
	}
	return validateText("status reason", s.Reason, 1024)
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindActorCreated] = carries(must("subject"))
	kinds[KindActorStatus] = carries(must("status"))
}
