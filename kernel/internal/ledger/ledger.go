// Package ledger is the kernel's state as a pure fold of the log: actors,
// their energy, envelopes and holds (paper §4.3–§4.5). Apply takes events
// in log order and nothing else — no clock, no configuration file, no
// randomness — so replaying a log always gives the same ledger, and the
// live kernel, a restart and `annald rebuild` cannot disagree.
//
// Apply checks, at every event, the invariants the kernel promises:
// balance ≥ reserved for every actor (INV-5, E(p) ≥ 0 with holds' locks),
// consumed + reserved ≤ budget for every envelope (Def. 4.18), references
// to existing actors, envelopes and holds, and final states staying final.
// An event that breaks one is refused with an error and changes nothing:
// the log or the kernel is wrong, and the caller must stop.
//
// Effects commute where the kernel may put events in one Tessera batch
// (balances are sums); events that are not commutative (status changes,
// hold answers, revocations) are never in flight together for one object,
// which the kernel ensures with claims. So the order Tessera gives a
// batch's entries never changes the ledger it folds to.
package ledger

import (
	"errors"
	"fmt"
	"strings"

	"github.com/annal-dev/annal/kernel/event"
)

// RootID is the root human, created by the genesis event.
const RootID = "root"

// MaxChain bounds envelope delegation depth.
const MaxChain = 16

// Actor is an actor with its energy.
type Actor struct {
	event.ActorRecord
	Status    string `json:"status"`
	CreatedAt uint64 `json:"created_at"`
	// Balance is E(p): energy received, less energy given and settled.
	Balance uint64 `json:"balance"`
	// Reserved is locked by the actor's pending holds; Balance ≥ Reserved.
	Reserved uint64 `json:"reserved"`
	// Consumed is all energy the actor's actions and holds settled.
	Consumed uint64 `json:"consumed"`

	// Execution control (control.go). Ring is the assigned ring, nil
	// until a human assigns one (BaseRing then gives Ring 3).
	Ring       *int           `json:"ring,omitempty"`
	TrustBP    uint64         `json:"trust_bp,omitempty"`
	Consensus  bool           `json:"consensus,omitempty"`
	Stopped    bool           `json:"stopped,omitempty"`
	SignalMask []string       `json:"signal_mask,omitempty"`
	Signals    []QueuedSignal `json:"signals,omitempty"`
	Policies   []string       `json:"policies,omitempty"`
}

// Available is what the actor may reserve now.
func (a *Actor) Available() uint64 { return a.Balance - a.Reserved }

// Active reports whether the actor may act.
func (a *Actor) Active() bool { return a.Status == event.StatusActive }

// Envelope is an issued envelope and its spending.
type Envelope struct {
	event.Envelope
	IssuedAt uint64 `json:"issued_at"`
	Revoked  bool   `json:"revoked"`
	Consumed uint64 `json:"consumed"`
	Reserved uint64 `json:"reserved"`
	// Policies are attached to the envelope and bind whoever acts under
	// it or under an envelope delegated from it.
	Policies []string `json:"policies,omitempty"`
}

// Remaining is budget − consumed − reserved.
func (v *Envelope) Remaining() uint64 { return v.Budget - v.Consumed - v.Reserved }

// Hold states.
const (
	HoldPending  = "pending"
	HoldApproved = "approved"
	HoldRejected = "rejected"
	HoldTimedOut = "timed_out"
	HoldFailed   = "approve_failed"
)

// Hold is a held action.
type Hold struct {
	ID          string       `json:"id"`
	Actor       string       `json:"actor"`
	Envelope    string       `json:"envelope"`
	Session     string       `json:"session,omitempty"`
	Action      event.Action `json:"action"`
	Reserved    uint64       `json:"reserved"`
	Deadline    string       `json:"deadline,omitempty"`
	RequestedAt uint64       `json:"requested_at"`
	Status      string       `json:"status"`
	AnsweredBy  string       `json:"answered_by,omitempty"`
	AnsweredAt  uint64       `json:"answered_at,omitempty"`
	Settled     uint64       `json:"settled"`
}

// Ledger is the folded state. Its maps are exported for reading and for
// persistence; only Apply changes them.
type Ledger struct {
	Energy    event.EnergyConfig   `json:"energy"`
	Actors    map[string]*Actor    `json:"actors"`
	Envelopes map[string]*Envelope `json:"envelopes"`
	Holds     map[string]*Hold     `json:"holds"`
	// Size is the number of events folded: the next index Apply expects.
	Size uint64 `json:"size"`
	// Denials counts action.denied events.
	Denials uint64 `json:"denials"`
	Control

	byCredential map[string]string
	byHolder     map[string][]string // agent -> its envelopes, in issue order
	elevationsOf map[string][]string // agent -> its elevations, in grant order
	pendingHolds map[string]int      // envelope -> its pending holds
	dirty        map[string]bool
}

// New returns the ledger of an empty log.
func New() *Ledger {
	return &Ledger{
		Actors: map[string]*Actor{}, Envelopes: map[string]*Envelope{}, Holds: map[string]*Hold{},
		byCredential: map[string]string{}, byHolder: map[string][]string{}, elevationsOf: map[string][]string{}, pendingHolds: map[string]int{},
		dirty: map[string]bool{}, Control: newControl(),
	}
}

// ActorByCredential finds the actor whose credential hashes to hash.
func (l *Ledger) ActorByCredential(hash string) (*Actor, bool) {
	id, ok := l.byCredential[hash]
	if !ok {
		return nil, false
	}
	a, ok := l.Actors[id]
	return a, ok
}

// PendingHolds returns how many holds under envelope await an answer.
func (l *Ledger) PendingHolds(envelope string) int { return l.pendingHolds[envelope] }

// EnvelopesOf returns the ids of the envelopes held by actor, oldest first.
func (l *Ledger) EnvelopesOf(actor string) []string { return l.byHolder[actor] }

// Chain returns the envelope and its ancestors, the envelope first.
func (l *Ledger) Chain(id string) ([]*Envelope, error) {
	var chain []*Envelope
	for id != "" {
		v, ok := l.Envelopes[id]
		if !ok {
			return nil, fmt.Errorf("envelope %s does not exist", id)
		}
		if len(chain) == MaxChain {
			return nil, fmt.Errorf("envelope %s is delegated more than %d deep", chain[0].ID, MaxChain)
		}
		chain = append(chain, v)
		id = v.Parent
	}
	return chain, nil
}

var zeroHash = strings.Repeat("0", 64)

// ErrInconsistent wraps every refusal of Apply: the event cannot follow
// the events before it.
var ErrInconsistent = errors.New("event is inconsistent with the log before it")

func inconsistent(index uint64, format string, args ...any) error {
	return fmt.Errorf("%w: entry %d: %s", ErrInconsistent, index, fmt.Sprintf(format, args...))
}
