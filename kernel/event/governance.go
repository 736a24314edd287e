package event

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The kinds of event that record what the kernel decided about actors,
// envelopes, energy and holds (paper §4.3–§4.5). Each is one log entry, and
// kernel state is the fold of them all.
const (
	// KindActorStatus records a human freezing, unfreezing or terminating an actor.
	KindActorStatus Kind = "actor.status"
	// KindEnvelopeIssued records a new envelope (Def. 4.13).
	KindEnvelopeIssued Kind = "envelope.issued"
	// KindEnvelopeRevoked records an envelope revoked by its issuer or root.
	KindEnvelopeRevoked Kind = "envelope.revoked"
	// KindEnergyProduced records energy production: ticks and the credits
	// they gave each actor (Def. 4.15–4.16).
	KindEnergyProduced Kind = "energy.produced"
	// KindActionDenied records an action a gate refused, at zero cost.
	KindActionDenied Kind = "action.denied"
	// KindHoldRequested records an action held for a human's answer (Def. 4.20).
	KindHoldRequested Kind = "hold.requested"
	// KindHoldAnswered records a hold that ended without its action being
	// committed: rejected, timed out, or approved but refused on re-check.
	// An approved hold whose action commits ends with that action's event.
	KindHoldAnswered Kind = "hold.answered"
	// KindSessionDelta records one agent turn's file changes in a session
	// as an ADR-0023 SemanticDelta, hash-chained to the session's previous
	// delta (kernel/delta).
	KindSessionDelta Kind = "session.delta"
)

// KernelActor is the actor of events the kernel writes on its own (energy
// production, hold timeouts). No credential authenticates as it.
const KernelActor = "kernel"

// Actor statuses. Terminated is final.
const (
	StatusActive     = "active"
	StatusFrozen     = "frozen"
	StatusTerminated = "terminated"
)

// Hold decisions.
const (
	HoldApprove = "approve"
	HoldReject  = "reject"
	HoldTimeout = "timeout"
)

// OutcomeDenied is the outcome of an action.denied event.
const OutcomeDenied = "denied"

// Grant is one capability: the targets a pattern matches, for some action
// types (Def. 4.11). Patterns are parsed and matched by kernel/internal/capability.
type Grant struct {
	Pattern string       `json:"pattern"`
	Actions []ActionType `json:"actions"`
}

// EnergyConfig is the energy model a log runs under, fixed in its genesis
// event so that replay never reads a configuration file.
type EnergyConfig struct {
	Costs Costs `json:"costs"`
	// PerTick is the energy produced each tick (λ·Δt, Def. 4.15).
	PerTick uint64 `json:"per_tick"`
	// TickMillis is the tick length Δt.
	TickMillis uint64 `json:"tick_ms"`
	// CommitmentPercent of a hold's reservation is charged when it is
	// rejected or times out (Def. 4.22: 20).
	CommitmentPercent uint64 `json:"commitment_percent"`
	// Genesis is the energy root holds at the start.
	Genesis uint64 `json:"genesis"`
}

// Costs is the cost function (Def. 4.17, Remark 4.4).
type Costs struct {
	Observe             uint64 `json:"observe"`
	Create              uint64 `json:"create"`
	Mutate              uint64 `json:"mutate"`
	ExecuteBase         uint64 `json:"execute_base"`
	ExecuteBytesPerUnit uint64 `json:"execute_bytes_per_unit"`
}

// StatusChange is carried by actor.status.
type StatusChange struct {
	Actor  string `json:"actor"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// Envelope is carried by envelope.issued: a temporary authorisation of
// Holder, issued by Issuer, spending at most Budget (Def. 4.13, 4.18).
type Envelope struct {
	ID     string `json:"id"`
	Holder string `json:"holder"`
	Issuer string `json:"issuer"`
	// Parent is the envelope this one was delegated from, if any (Remark 4.3).
	Parent string  `json:"parent,omitempty"`
	Budget uint64  `json:"budget"`
	Grants []Grant `json:"grants"`
	// HoldOn lists the actions that wait for a human's answer (Def. 4.19).
	HoldOn []Grant `json:"hold_on,omitempty"`
	// HoldTimeoutSecs, if set, ends an unanswered hold as a timeout.
	HoldTimeoutSecs uint64  `json:"hold_timeout_secs,omitempty"`
	Expires         Instant `json:"expires,omitzero"`
	// RequireSigned: actions under the envelope must be signed by their
	// actor (signed.go).
	RequireSigned bool `json:"require_signed,omitempty"`
	// SealPayloads: payloads of actions under the envelope are sealed
	// (sealed.go).
	SealPayloads bool `json:"seal_payloads,omitempty"`
}

// EnvelopeEnd is carried by envelope.revoked.
type EnvelopeEnd struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// Production is carried by energy.produced.
type Production struct {
	Ticks   uint64   `json:"ticks"`
	Credits []Credit `json:"credits"`
}

// Credit is the energy one actor received.
type Credit struct {
	Actor  string `json:"actor"`
	Amount uint64 `json:"amount"`
}

// Denial is carried by action.denied: which gate refused and why.
type Denial struct {
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
}

// Hold is carried by hold.requested, hold.answered, and by the action
// event that commits an approved hold.
type Hold struct {
	ID string `json:"id"`
	// Envelope, Reserved and Deadline are set in hold.requested.
	Envelope string  `json:"envelope,omitempty"`
	Reserved uint64  `json:"reserved,omitempty"`
	Deadline Instant `json:"deadline,omitzero"`
	// Decision and AnsweredBy are set when the hold ends; Settled is what
	// its end charged (hold.answered).
	Decision   string `json:"decision,omitempty"`
	AnsweredBy string `json:"answered_by,omitempty"`
	Settled    uint64 `json:"settled,omitempty"`
	// Reason is why the hold ended as it did, at most 2048 bytes of UTF-8,
	// wherever it ends: a rejection's, a time-out's, an approval's (on the
	// approved action's event; optional, since logs written before approvals
	// carried one have none), or an approval refused on re-check (the
	// approver's reason and the refusal's).
	Reason string `json:"reason,omitempty"`
}

// MaxGrants bounds the grants of an actor or envelope.
const MaxGrants = 64

// MaxCredits bounds the credits of one energy.produced event, so that it
// fits in one entry.
const MaxCredits = 1024

func validateGrants(what string, gs []Grant) error {
	if len(gs) > MaxGrants {
		return fmt.Errorf("%s has %d grants, more than %d", what, len(gs), MaxGrants)
	}
	for i, g := range gs {
		if g.Pattern == "" || len(g.Pattern) > MaxTargetSize || !utf8.ValidString(g.Pattern) {
			return fmt.Errorf("%s grant %d: pattern must be 1 to %d bytes of UTF-8", what, i+1, MaxTargetSize)
		}
		if len(g.Actions) == 0 || len(g.Actions) > 4 {
			return fmt.Errorf("%s grant %d (%s): must list 1 to 4 action types", what, i+1, g.Pattern)
		}
		for j, t := range g.Actions {
			if !t.Valid() {
				return fmt.Errorf("%s grant %d (%s): action type %q is not one of observe, create, mutate, execute", what, i+1, g.Pattern, t)
			}
			if j > 0 && g.Actions[j-1] >= t {
				return fmt.Errorf("%s grant %d (%s): action types must be sorted and distinct", what, i+1, g.Pattern)
			}
		}
	}
	return nil
}

func validateText(what, s string, limit int) error {
	if len(s) > limit || !utf8.ValidString(s) {
		return fmt.Errorf("%s must be at most %d bytes of UTF-8", what, limit)
	}
	return nil
}

// writable reports whether t is unset or has an RFC 3339 form.
func writable(t Instant) bool { return t.IsZero() || (t.Year() >= 1 && t.Year() <= 9999) }

// validateTime checks that a set instant has an RFC 3339 form, which
// needs a four-digit year: an expiry in the year 10000 would encode to an
// entry that Parse refuses.
func validateTime(what string, t Instant) error {
	if !writable(t) {
		return fmt.Errorf("%s %v is outside the years 0001 to 9999 that RFC 3339 can write", what, t.Time)
	}
	return nil
}

func (c *EnergyConfig) validate() error {
	k := c.Costs
	switch {
	case !(k.Observe <= k.Create && k.Create <= k.Mutate && k.Mutate <= k.ExecuteBase):
		return fmt.Errorf("energy costs must be ordered observe <= create <= mutate <= execute (Def. 4.17)")
	case k.ExecuteBytesPerUnit == 0:
		return fmt.Errorf("energy costs: execute_bytes_per_unit must be positive")
	case c.PerTick < k.ExecuteBase:
		return fmt.Errorf("energy per tick %d is below the execute base cost %d (Axiom 4.4)", c.PerTick, k.ExecuteBase)
	case c.TickMillis == 0:
		return fmt.Errorf("energy tick length must be positive")
	case c.CommitmentPercent > 100:
		return fmt.Errorf("commitment percent %d is more than 100", c.CommitmentPercent)
	case c.Genesis > MaxEnergy || c.PerTick > MaxEnergy || k.ExecuteBase > MaxEnergy:
		return fmt.Errorf("energy figures must be at most 2^53")
	}
	return nil
}

func (s *StatusChange) validate() error {
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

func (v *Envelope) validate() error {
	switch {
	case !ValidEnvelopeID(v.ID):
		return fmt.Errorf("envelope id %q is not valid", v.ID)
	case !ValidActorID(v.Holder) || !ValidActorID(v.Issuer):
		return fmt.Errorf("envelope %s: holder and issuer must be actor ids", v.ID)
	case v.Parent != "" && !ValidEnvelopeID(v.Parent):
		return fmt.Errorf("envelope %s: parent %q is not an envelope id", v.ID, v.Parent)
	case v.Budget > MaxEnergy:
		return fmt.Errorf("envelope %s: budget above 2^53", v.ID)
	case len(v.Grants) == 0:
		return fmt.Errorf("envelope %s grants nothing", v.ID)
	}
	if err := validateGrants("envelope "+v.ID, v.Grants); err != nil {
		return err
	}
	if err := validateGrants("envelope "+v.ID+" hold_on", v.HoldOn); err != nil {
		return err
	}
	return validateTime("envelope "+v.ID+" expiry", v.Expires)
}

// ValidEnvelopeID reports whether id can name an envelope: "env-" and 1 to
// 60 lower-case letters, digits or '-'.
func ValidEnvelopeID(id string) bool {
	rest, ok := strings.CutPrefix(id, "env-")
	return ok && len(rest) > 0 && len(rest) <= 60 && strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// ValidHoldID reports whether id can name a hold: "hold-" and 1 to 60
// lower-case letters, digits or '-'.
func ValidHoldID(id string) bool {
	rest, ok := strings.CutPrefix(id, "hold-")
	return ok && len(rest) > 0 && len(rest) <= 60 && strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

func (p *Production) validate() error {
	if p.Ticks == 0 {
		return fmt.Errorf("energy production covers no tick")
	}
	if len(p.Credits) > MaxCredits {
		return fmt.Errorf("energy production has %d credits, more than %d", len(p.Credits), MaxCredits)
	}
	for i, c := range p.Credits {
		if !ValidActorID(c.Actor) || c.Amount == 0 || c.Amount > MaxEnergy {
			return fmt.Errorf("energy credit %d: actor %q amount %d is not valid", i+1, c.Actor, c.Amount)
		}
		if i > 0 && p.Credits[i-1].Actor >= c.Actor {
			return fmt.Errorf("energy credits must be sorted by actor, each actor once")
		}
	}
	return nil
}

func (d *Denial) validate() error {
	if d.Stage == "" || len(d.Stage) > 64 {
		return fmt.Errorf("denial stage must be 1 to 64 bytes")
	}
	return validateText("denial reason", d.Reason, 2048)
}

func (h *Hold) validate(kind Kind) error {
	if !ValidHoldID(h.ID) {
		return fmt.Errorf("hold id %q is not valid", h.ID)
	}
	if err := validateText("hold reason", h.Reason, 2048); err != nil {
		return err
	}
	if h.Reserved > MaxEnergy || h.Settled > MaxEnergy {
		return fmt.Errorf("hold %s: energy above 2^53", h.ID)
	}
	requested := h.Envelope != "" || !h.Deadline.IsZero()
	answered := h.Decision != "" || h.AnsweredBy != "" || h.Settled != 0
	switch kind {
	case KindHoldRequested:
		if !ValidEnvelopeID(h.Envelope) || answered || h.Reason != "" {
			return fmt.Errorf("hold %s: a request names its envelope and carries no answer", h.ID)
		}
		return validateTime("hold deadline", h.Deadline)
	case KindHoldAnswered:
		if requested || h.Reserved != 0 {
			return fmt.Errorf("hold %s: an answer carries no request fields", h.ID)
		}
		switch h.Decision {
		case HoldReject, HoldTimeout, HoldApprove:
		default:
			return fmt.Errorf("hold %s: decision %q is not approve, reject or timeout", h.ID, h.Decision)
		}
		if !ValidActorID(h.AnsweredBy) {
			return fmt.Errorf("hold %s: answered_by %q is not an actor id", h.ID, h.AnsweredBy)
		}
	case KindAction:
		if requested || h.Decision != HoldApprove || !ValidActorID(h.AnsweredBy) || h.Settled != 0 || h.Reserved != 0 {
			return fmt.Errorf("hold %s: an action commits a hold only as its approval, with answered_by", h.ID)
		}
	}
	return nil
}

// DefaultEnergy is the energy model of a log whose genesis names none: the
// paper's costs 0/10/15/25+⌊output_bytes/256⌋ (Remark 4.4), 100 units per
// one-second tick, the 20% commitment cost (Def. 4.22), and a million units
// for root to fund its agents with.
var DefaultEnergy = EnergyConfig{
	Costs:             Costs{Observe: 0, Create: 10, Mutate: 15, ExecuteBase: 25, ExecuteBytesPerUnit: 256},
	PerTick:           100,
	TickMillis:        1000,
	CommitmentPercent: 20,
	Genesis:           1_000_000,
}

// Quote is the cost of an action of type t (Def. 4.17); outputBytes counts
// only for execute.
func (c Costs) Quote(t ActionType, outputBytes uint64) uint64 {
	switch t {
	case Observe:
		return c.Observe
	case Create:
		return c.Create
	case Mutate:
		return c.Mutate
	case Execute:
		return c.ExecuteBase + outputBytes/c.ExecuteBytesPerUnit
	}
	return 0
}

// Commitment is what a hold that reserved r costs when it is rejected or
// times out: ⌈percent × r / 100⌉ (Def. 4.22), in integers.
func (c EnergyConfig) Commitment(reserved uint64) uint64 {
	return (reserved*c.CommitmentPercent + 99) / 100
}

// Validate checks an energy model as a genesis event would carry it.
func (c EnergyConfig) Validate() error { return c.validate() }
