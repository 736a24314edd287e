// Package ledger is the kernel's state as a fold of the log, and the one
// place where the rules of every event kind are written.
//
// Each kind of event has one rule (rules.go): a list of gates, run in order
// by one loop, that read the ledger and say whether the event may follow the
// events folded so far, and an apply that folds it and cannot fail once the
// gates passed. The kernel decides by building the event it would log and
// running the same gates against the ledger it will be folded onto (Check);
// replay, restart, `annald rebuild` and `annald audit` run them again on
// every entry (Fold). So a rule cannot drift between deciding and folding,
// and replaying any log under the rules either reproduces every decision or
// names the first entry that breaks one.
//
// The fold reads nothing but the log: no clock (an event's own time stands
// for "now"), no configuration file, no randomness. What only the live
// kernel knows — credentials, the rate limit, the energy held by decided
// events not yet folded, the bound on pending holds — reaches the gates
// through Options, which replay leaves empty.
//
// Order: events whose effects do not commute (an action and a revoke,
// freeze, quarantine or stop of its actor or envelope; two answers to one
// hold) must be folded in the order they were decided. Claims (claims.go)
// say which objects an event reads and writes; the kernel never has two
// events in flight that claim one object when either writes it. Energy is a
// sum, and decided events hold what they draw (Draw) until they are folded,
// so the order Tessera gives the events of one batch never changes whether
// a rule holds nor the ledger it folds to.
//
// Rules versions: logs written before Rules name none in their genesis and
// fold under RulesLegacy until a log.rules entry adopts Rules. A rule
// introduced by Rules that such a log broke before adopting it is reported
// (Legacy) and tolerated; a log can never break a rule it had adopted, nor
// an inconsistency (a missing reference, energy below zero, a final state
// undone) at any version.
package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/policy"
	"github.com/annal-dev/annal/kernel/ring"
)

// RootID is the root human, created by the genesis event.
const RootID = "root"

// MaxChain bounds envelope delegation depth.
const MaxChain = 16

// Versions of the rules a log is folded under.
const (
	// RulesLegacy is the version of a log whose genesis names none: the
	// rules of the releases before Rules, which checked references, energy
	// and final states but not every rule the kernel decided by.
	RulesLegacy = 1
	// RulesGoverned checks by the fold every rule the kernel decides by.
	RulesGoverned = 2
	// RulesIntents adds execute intents and their results (intents.go):
	// an execute decided, and held, before it runs.
	RulesIntents = 3
	// Rules is the version of this release, which adds at once what the
	// seeds' last rows need: RulesPolicyKill (control.go), RulesIntentLocks
	// (coordination.go), RulesVFS (vfs.go), RulesSagaBackoff (sagas.go) and
	// RulesRetention (retention.go), each version 6.
	Rules = RulesVFS
)

// Ledger is the folded state. Its maps are exported for reading and for
// persistence; only Fold changes them.
type Ledger struct {
	// Origin is the log's origin, from its genesis.
	Origin string `json:"origin,omitempty"`
	// Rules is the rules version in force (RulesLegacy or Rules).
	Rules     int                  `json:"rules"`
	Energy    event.EnergyConfig   `json:"energy"`
	Actors    map[string]*Actor    `json:"actors"`
	Envelopes map[string]*Envelope `json:"envelopes"`
	Holds     map[string]*Hold     `json:"holds"`
	// Size is the number of events folded: the next index Fold expects.
	Size uint64 `json:"size"`
	// Denials counts action.denied events.
	Denials uint64 `json:"denials"`
	// Legacy counts entries folded under RulesLegacy that broke a rule of
	// Rules (tolerated; `annald audit` lists them).
	Legacy uint64 `json:"legacy,omitempty"`
	// Tolerated are the entries that break a rule and that the fold passed
	// over, keyed by index (tolerated.go).
	Tolerated map[string]*Tolerated `json:"tolerated"`
	Control

	credentials  *credentialIndex
	byHolder     map[string][]string          // agent -> its envelopes, in issue order
	elevationsOf map[string][]string          // agent -> its elevations, in grant order
	pendingHolds map[string]int               // envelope -> its pending holds
	compiled     map[string]*policy.Compiled  // policy name -> its latest version, compiled
	keys         map[string]*event.SigningKey // signing key -> parsed
	// VerifiedAhead, when set, reports whether the signature of ev was
	// already verified, over the statement of the log origin, under the
	// signing key vkey (a replay checks signatures on all cores ahead of
	// the fold): the fold then does not verify it again. It is no part of
	// the state, and only ever saves a verification that would succeed.
	VerifiedAhead func(ev *event.Event, origin, vkey string) bool `json:"-"`
	prunedNonces  int                                             // len(Nonces) after the last forgetting
	// sealers counts the actors and envelopes that ask for sealed
	// payloads; AnyMustSeal reads it without the ledger's lock.
	sealers atomic.Int64
	dirty   map[string]bool
	// claimsChecked: folds check their claims in a test binary
	// (claimcheck.go).
	claimsChecked bool
}

// New returns the ledger of an empty log.
func New() *Ledger {
	return &Ledger{
		Rules:  RulesLegacy,
		Actors: map[string]*Actor{}, Envelopes: map[string]*Envelope{}, Holds: map[string]*Hold{}, Tolerated: map[string]*Tolerated{},
		credentials: &credentialIndex{byHash: map[string]identity{}}, byHolder: map[string][]string{}, elevationsOf: map[string][]string{},
		pendingHolds: map[string]int{}, compiled: map[string]*policy.Compiled{}, keys: map[string]*event.SigningKey{},
		dirty: map[string]bool{}, Control: newControl(),
	}
}

// Options are what only the live kernel knows. The zero Options is replay.
type Options struct {
	// Pending is the energy decided events not yet folded hold; nil in
	// replay.
	Pending *Pending
	// Admit draws one token from agent's rate-limit bucket at its effective
	// ring (Execution Control §9); nil in replay, where the limit was
	// enforced when the event was decided.
	Admit func(agent string, effective ring.Ring) error
	// AdmitPolicy draws one token from agent's bucket under a policy with
	// max_calls_per_minute (live only, like Admit).
	AdmitPolicy func(agent, policy string, perMinute int) error
	// MaxPendingHolds bounds the pending holds of one envelope (threat T2:
	// locking energy with holds); 0 in replay.
	MaxPendingHolds int
	// Open returns the plaintext of a sealed payload, for the gates that
	// read payloads; nil, or false, where it is not known (sealed.go).
	Open func(*event.SealedPayload) (json.RawMessage, bool)
}

// Check reports whether ev may follow the events folded so far: it runs
// the gates of ev's kind in order and returns the first *Violation. It
// reads the ledger only.
func (l *Ledger) Check(ev *event.Event, opts Options) error {
	if v, _ := l.check(ev, opts, Rules); v != nil {
		return v
	}
	return nil
}

// check runs ev's gates and returns the first violation of a rule that
// holds at rules version `in force`. A violation of a rule introduced
// later is tolerated (counted in tolerated) and the gates go on, so that no
// inconsistency behind it goes unseen.
func (l *Ledger) check(ev *event.Event, opts Options, inForce int) (v *Violation, tolerated []*Violation) {
	r := l.ruleFor(ev)
	if r == nil {
		return malformed("kind %s has no rule", ev.Kind), nil
	}
	c := checkers.Get().(*checker)
	defer putChecker(c)
	*c = checker{l: l, ev: ev, rule: r, opts: opts, at: ev.Time}
	if r.actionFacts {
		c.actionFacts()
	}
	for _, pre := range []func(*checker) *Violation{checkSigned, checkSealed, checkVFS} {
		if v := pre(c); v != nil {
			if v.since <= inForce {
				return v, tolerated
			}
			tolerated = append(tolerated, v)
		}
	}
	for _, g := range r.gates {
		if v := g.check(c); v != nil {
			v.Stage, v.Gate = g.stage, g.name
			if v.since <= inForce {
				return v, tolerated
			}
			tolerated = append(tolerated, v)
		}
	}
	return nil, tolerated
}

// checkers are the checkers of checks that returned, for the next: a
// checker, with the facts it carries, is the one allocation every check
// made, twice for each action (decided, then folded). Nothing keeps a
// checker once its check returns: the gates return violations built
// apart from it.
var checkers = sync.Pool{New: func() any { return new(checker) }}

// putChecker empties c, so that the pool keeps no ledger alive, and keeps
// it for the next check.
func putChecker(c *checker) {
	*c = checker{}
	checkers.Put(c)
}

// Fold checks the event at index and folds it into the ledger. index MUST
// be l.Size: events are folded in log order, each once. On error nothing
// changes; the error is a *FoldError naming the entry and the rule.
func (l *Ledger) Fold(index uint64, ev *event.Event) error {
	_, err := l.FoldReport(index, ev)
	return err
}

// FoldReport is Fold, and also returns the rules of a later version than
// the log had adopted that the event broke (tolerated: an older release
// wrote it).
func (l *Ledger) FoldReport(index uint64, ev *event.Event) (tolerated []*Violation, err error) {
	return l.FoldOpened(index, ev, nil)
}

// FoldOpened is FoldReport by a reader that holds sealed payloads (an
// audit of a data folder): open gives the plaintext of those it still has,
// so that the rules that read payloads judge them too (sealed.go).
func (l *Ledger) FoldOpened(index uint64, ev *event.Event, open func(*event.SealedPayload) (json.RawMessage, bool)) (tolerated []*Violation, err error) {
	switch {
	case index != l.Size:
		return nil, &FoldError{Index: index, Kind: ev.Kind, Actor: ev.Actor, Violation: malformed("the ledger expects entry %d next", l.Size)}
	case index == 0 && ev.Kind != event.KindGenesis:
		return nil, &FoldError{Index: index, Kind: ev.Kind, Actor: ev.Actor, Violation: malformed("the first entry is %s, not the genesis", ev.Kind)}
	case index > 0 && ev.Kind == event.KindGenesis:
		return nil, &FoldError{Index: index, Kind: ev.Kind, Actor: ev.Actor, Violation: malformed("a second genesis")}
	}
	v, tolerated := l.check(ev, Options{Open: open}, l.Rules)
	if v != nil {
		return nil, &FoldError{Index: index, Kind: ev.Kind, Actor: ev.Actor, Violation: v}
	}
	l.apply(index, ev, len(tolerated) > 0)
	return tolerated, nil
}

// FoldChecked folds ev at index as Fold does, without running its rule
// again: for an entry whose Fold onto an equal ledger passed — the same
// entries folded in the same order from the same state, as the kernel's
// sequencing copy folds each entry right before it is written — and
// tolerated says whether that fold tolerated a violation (FoldReport).
// Why: the rule is a pure function of the ledger and the event, so the
// second run can only repeat the first; it cost the kernel a tenth of its
// time per action. What the caller vouches for is checked where it is
// cheap to be wrong about: in a test binary the rule runs anyway, and a
// refusal, or a different tolerated, panics (not in one that runs
// benchmarks, which measure what the kernel's binaries do, as the claims
// check is not: claimcheck.go).
func (l *Ledger) FoldChecked(index uint64, ev *event.Event, tolerated bool) error {
	if index != l.Size || (index == 0) != (ev.Kind == event.KindGenesis) {
		_, err := l.FoldReport(index, ev) // refuses it, naming why
		return err
	}
	if checkClaims() {
		v, tol := l.check(ev, Options{}, l.Rules)
		if v != nil || (len(tol) > 0) != tolerated {
			panic(fmt.Sprintf("ledger: entry %d (%s by %s) folded as checked on an equal ledger, but its rule says %v (tolerated %d, vouched %v): the ledgers differ",
				index, ev.Kind, ev.Actor, v, len(tol), tolerated))
		}
	}
	l.apply(index, ev, tolerated)
	return nil
}

// apply is the change of a checked fold of ev at index; tolerated: the
// check tolerated a violation of a rule the log had not adopted.
func (l *Ledger) apply(index uint64, ev *event.Event, tolerated bool) {
	if tolerated {
		l.Legacy++ // it broke a rule the log had not adopted yet
	}
	cc := l.beginClaimCheck(index, ev)
	l.ruleFor(ev).apply(l, index, ev)
	l.applySigned(index, ev)
	l.Size++
	l.touch("meta")
	l.endClaimCheck(cc, index, ev)
}

// Violation is an event that breaks a rule: the gate that refused it, in
// which stage, the class of refusal and why.
type Violation struct {
	Stage  string
	Gate   string
	Class  Class
	Reason string
	// Policy names a broken policy that asks for SIGPOLICY (policy gate).
	Policy string
	// Code is a reason code a specification names, if any (an elevation's
	// §8.3 denial reason).
	Code string
	// since is the rules version that introduced the rule.
	since int
}

func (v *Violation) Error() string { return v.Gate + ": " + v.Reason }

// Since is the rules version that introduced the broken rule.
func (v *Violation) Since() int { return v.since }

// Class says what kind of refusal a violation is, for the kernel's answer.
type Class int

// Classes of violation.
const (
	// Forbidden: the actor may not do this.
	Forbidden Class = iota
	// Invalid: the event is malformed for its kind.
	Invalid
	// NotFound: the event names an object that does not exist.
	NotFound
	// Conflict: the object is not in a state that allows this.
	Conflict
	// NoEnergy: an actor or an envelope cannot pay.
	NoEnergy
	// RateLimited: the agent's token bucket is empty (live only).
	RateLimited
	// Unauthenticated: the actor does not exist.
	Unauthenticated
)

// refuse is a violation of a rule the fold checks since RulesGoverned.
func refuse(class Class, format string, args ...any) *Violation {
	return &Violation{Class: class, Reason: fmt.Sprintf(format, args...), since: RulesGoverned}
}

// inconsistent is a violation no log may hold at any rules version: a
// reference to nothing, energy below zero, a final state undone. apply
// relies on these gates alone.
func inconsistent(class Class, format string, args ...any) *Violation {
	return &Violation{Class: class, Reason: fmt.Sprintf(format, args...), since: RulesLegacy}
}

// malformed is an event out of place in any log: gate form.
func malformed(format string, args ...any) *Violation {
	return inconsistent(Invalid, format, args...).at(GateForm)
}

// ErrInconsistent is wrapped by every FoldError: the event cannot follow
// the events before it.
var ErrInconsistent = errors.New("event is inconsistent with the log before it")

// FoldError is an entry that breaks a rule.
type FoldError struct {
	Index uint64
	Kind  event.Kind
	Actor string
	*Violation
}

func (e *FoldError) Error() string {
	return fmt.Sprintf("%v: entry %d (%s by %s) breaks the %s rule: %s", ErrInconsistent, e.Index, e.Kind, e.Actor, e.Gate, e.Reason)
}

// Unwrap returns ErrInconsistent.
func (e *FoldError) Unwrap() error { return ErrInconsistent }

// ActorByCredential finds the actor whose credential hashes to hash.
func (l *Ledger) ActorByCredential(hash string) (*Actor, bool) {
	who, ok := l.credentials.byHash[hash]
	if !ok {
		return nil, false
	}
	a, ok := l.Actors[who.id]
	return a, ok
}

// credentialIndex maps a credential's hash to the actor it belongs to. It
// has a lock of its own, so that IdentifyCredential needs none of the
// ledger's: a credential never changes, and an actor's id and kind never
// do, so entries are only added, by a fold, which holds the ledger's lock
// too (the ledger's own readers, under that lock, need no more).
type credentialIndex struct {
	mu     sync.RWMutex
	byHash map[string]identity
}

// identity is what never changes of an actor.
type identity struct {
	id   string
	kind event.ActorKind
}

func (l *Ledger) addCredential(a *Actor) {
	l.credentials.mu.Lock()
	l.credentials.byHash[a.CredentialSHA256] = identity{id: a.ID, kind: a.Kind}
	l.credentials.mu.Unlock()
}

// credentialTaken reports whether an actor has the credential of hash.
func (l *Ledger) credentialTaken(hash string) bool {
	_, ok := l.credentials.byHash[hash]
	return ok
}

// IdentifyCredential returns the id and kind of the actor whose credential
// hashes to hash. Unlike the ledger's other methods it may be called
// without the ledger's lock, while the ledger folds.
func (l *Ledger) IdentifyCredential(hash string) (id string, kind event.ActorKind, ok bool) {
	l.credentials.mu.RLock()
	who, ok := l.credentials.byHash[hash]
	l.credentials.mu.RUnlock()
	return who.id, who.kind, ok
}

// touch marks key changed, for persistence (TakeDirty), unless nobody
// persists this ledger (Untracked).
func (l *Ledger) touch(key string) {
	if l.dirty != nil {
		l.dirty[key] = true
	}
}

func (l *Ledger) touchActor(a *Actor)       { l.touch(a.stateKey()) }
func (l *Ledger) touchEnvelope(v *Envelope) { l.touch(v.stateKey()) }
func (l *Ledger) touchHold(h *Hold)         { l.touch("hold/" + h.ID) }

// Untracked stops l from keeping the keys its folds change: for a ledger
// that is never persisted (the kernel's sequencing copy), whose record of
// changes would only grow. TakeDirty returns nothing after it.
func (l *Ledger) Untracked() { l.dirty = nil }

// MarkDirty marks keys changed again: their write to the state failed,
// and must be retried with the next.
func (l *Ledger) MarkDirty(keys []string) {
	for _, k := range keys {
		l.dirty[k] = true
	}
}

// TakeDirty returns the keys ("meta", "actor/<id>", "envelope/<id>", ...)
// changed since the last call, for persistence.
func (l *Ledger) TakeDirty() []string {
	keys := make([]string, 0, len(l.dirty))
	for k := range l.dirty {
		keys = append(keys, k)
	}
	clear(l.dirty)
	return keys
}
