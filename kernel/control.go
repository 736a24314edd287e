package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/ring"
	"github.com/annal-dev/annal/kernel/session"
)

// RingAssignment is a human's assignment of an agent's trust score.
type RingAssignment struct {
	// Trust is the effective score, 0.0 to 1.0.
	Trust     float64
	Consensus bool
	// Ring, if set, demotes the agent below what its score gives.
	Ring   *int
	Reason string
}

// AssignRing records an agent's trust score and consensus and the ring
// they give (§4.1): Ring 1 above 0.95 with consensus, Ring 2 above 0.60,
// Ring 3 otherwise; never Ring 0. A human may ask for a less privileged
// ring (demotion, §4.3). Elevations whose trust threshold the new score no
// longer meets are revoked in the same decision's wake.
func (k *Kernel) AssignRing(ctx context.Context, by *Actor, agentID string, req RingAssignment) (*Receipt, error) {
	const stage = "ring"
	score, err := ring.ScoreFromFloat(req.Trust)
	if err != nil {
		return nil, denyAt(stage, GateForm, ErrInvalid, "trust: %v", err)
	}
	computed := ring.FromEffScore(score, req.Consensus)
	assigned := computed
	if req.Ring != nil {
		r, err := ring.ParseRing(*req.Ring)
		switch {
		case err != nil:
			return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
		case r.MorePrivilegedThan(computed):
			return nil, denyAt(stage, GateRing, ErrForbidden, "%s is more privileged than trust %.4f (consensus %v) gives: %s (§4.1)", r, score.Float(), req.Consensus, computed)
		}
		assigned = r
	}
	d, err := k.decide(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindRingAssigned, Actor: by.ID, Ring: &event.RingAssignment{
			Agent: agentID, TrustBP: uint64(score), Consensus: req.Consensus, Ring: int(assigned), Reason: req.Reason}}, nil
	})
	if err != nil {
		return nil, err
	}
	k.revokeUntrustedElevations(ctx, agentID, score)
	k.renewRateBucket(by, agentID)
	return receiptOf(d, "", ""), nil
}

// renewRateBucket gives an agent a new token bucket, full, with its new
// ring's limits (§9.5: "the rate limiter MUST recreate the token bucket
// with the new ring's limits") after a ring change a human decided. A
// change the agent brings about itself (its own elevation request, or the
// end of one) keeps the tokens it had, capped at the new burst: an agent
// may ask for an elevation of a millisecond, and a full bucket at each
// change would let it reset its own limit at will.
func (k *Kernel) renewRateBucket(by *Actor, agent string) {
	if by.Kind == event.Human {
		k.forgetAgent(agent)
	}
}

// revokeUntrustedElevations ends the agent's elevations that its trust
// score no longer earns (§8.4). The kernel records the end itself, as it
// records an elevation that ran out: the human who demoted the agent acted
// with one request, which its ring assignment took (and, if the human signs
// its requests, whose signature that event carries).
func (k *Kernel) revokeUntrustedElevations(ctx context.Context, agentID string, score ring.Score) {
	k.mu.Lock()
	var untrusted []ledger.Elevation
	for _, v := range k.ledger.ElevationsOf(agentID) {
		if _, denial := ring.DecideElevation(ring.ElevationRequest{Agent: agentID, Current: ring.Ring(v.From), Target: ring.Ring(v.Ring), Attested: true, Trust: &score}, false); denial == ring.InsufficientTrust {
			untrusted = append(untrusted, *v)
		}
	}
	k.mu.Unlock()
	for _, v := range untrusted {
		_, err := k.decide(ctx, "elevation", func(l *ledger.Ledger, _ event.Instant) (*event.Event, error) {
			return &event.Event{Kind: event.KindElevationEnded, Actor: event.KernelActor, Session: v.Session,
				ElevationEnd: &event.ElevationEnd{ID: v.ID, Agent: agentID, End: event.EndUntrusted, Reason: "the agent's trust score fell below the elevation's threshold (§8.4)"}}, nil
		})
		if err != nil {
			k.logger.Warn("end an elevation after a demotion", "elevation", v.ID, "err", err)
		}
	}
}

// ConfigureRings sets the network allowlist of Ring 2 (§7.2). Root only.
func (k *Kernel) ConfigureRings(ctx context.Context, by *Actor, allowlist []string) (*Receipt, error) {
	const stage = "rings"
	for _, d := range allowlist {
		if err := ring.ParseAllowEntry(d); err != nil {
			return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
		}
	}
	return k.decideControl(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindRingsConfigured, Actor: by.ID, RingConfig: &event.RingConfig{NetworkAllowlist: slices.Clone(allowlist)}}, nil
	})
}

// RegisterAction records an action descriptor (§5) and the actions (target
// patterns and types) it classifies. Root only: a descriptor decides the
// ring every agent needs.
func (k *Kernel) RegisterAction(ctx context.Context, by *Actor, d ring.Descriptor, appliesTo []event.Grant) (*Receipt, error) {
	const stage = "descriptor"
	if err := d.Validate(); err != nil {
		return nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	grants, err := normalizeGrants(appliesTo)
	if err != nil || len(grants) == 0 {
		if err == nil {
			err = errors.New("applies_to lists no action")
		}
		return nil, denyAt(stage, GateForm, ErrInvalid, "descriptor %s: %v", d.ActionID, err)
	}
	return k.decideControl(ctx, stage, func(*ledger.Ledger, event.Instant) (*event.Event, error) {
		return &event.Event{Kind: event.KindActionRegistered, Actor: by.ID,
			Descriptor: &event.DescriptorRegistration{Descriptor: d, AppliesTo: grants}}, nil
	})
}

// ElevationRequest asks for a time-bounded ring elevation (§8.2).
type ElevationRequest struct {
	Agent   string
	Session string
	Ring    int
	TTL     time.Duration
	Reason  string
}

// ElevationDenied is an elevation refused with one of §8.3's reasons.
type ElevationDenied struct {
	*Denial
	Reason ring.DenialReason
}

func (e *ElevationDenied) Unwrap() error { return e.Denial }

// RequestElevation grants a time-bounded elevation (§8). The agent may
// ask for itself; the trust score is the one a human recorded, never one
// the caller sends. Ring 1 needs an attestation, which in Annal is the
// authenticated request of a human who oversees the agent: an agent's own
// request for Ring 1 is refused with no_sponsorship. Ring 0 never.
func (k *Kernel) RequestElevation(ctx context.Context, by *Actor, req ElevationRequest) (*Receipt, *ledger.Elevation, error) {
	const stage = "elevation"
	target, err := ring.ParseRing(req.Ring)
	if err != nil {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	id, err := newElevationID()
	if err != nil {
		return nil, nil, err
	}
	attested := ""
	if by.ID != req.Agent {
		attested = by.ID
	}
	d, err := k.decide(ctx, stage, func(l *ledger.Ledger, now event.Instant) (*event.Event, error) {
		from, trust := ring.Default, uint64(0) // the rule refuses what is not an agent
		if a, ok := l.Actors[req.Agent]; ok {
			from, trust = a.BaseRing(), a.TrustBP
		}
		ttl := req.TTL // negative: the ring gate refuses it (expired_ttl)
		switch {
		case ttl == 0:
			ttl = ring.DefaultElevationTTL
		case ttl > ring.MaxElevationTTL:
			ttl = ring.MaxElevationTTL
		}
		return &event.Event{Kind: event.KindElevationGranted, Actor: by.ID, Session: req.Session, Elevation: &event.Elevation{
			ID: id, Agent: req.Agent, From: int(from), Ring: int(target), TrustBP: trust,
			Expires: now.Add(ttl), AttestedBy: attested, Reason: req.Reason}}, nil
	})
	if err != nil {
		var den *Denial
		if errors.As(err, &den) && den.Code != "" {
			return nil, nil, &ElevationDenied{Denial: den, Reason: ring.DenialReason(den.Code)}
		}
		return nil, nil, err
	}
	// What the event recorded, from the ledger once it is folded (it is,
	// unless the kernel stopped right after writing it).
	v := ledger.Elevation{Elevation: *d.ev.Elevation, Session: d.ev.Session, GrantedAt: d.index}
	k.mu.Lock()
	if folded, ok := k.ledger.Elevations[id]; ok {
		v = *folded
	}
	k.mu.Unlock()
	k.renewRateBucket(by, req.Agent)
	return receiptOf(d, "", ""), &v, nil
}

// RevokeElevation ends an elevation at once (§8.6): the agent itself or a
// human who oversees it may.
func (k *Kernel) RevokeElevation(ctx context.Context, by *Actor, id, reason string) (*Receipt, error) {
	const stage = "elevation"
	var agent string
	rc, err := k.decideControl(ctx, stage, func(l *ledger.Ledger, _ event.Instant) (*event.Event, error) {
		v, ok := l.Elevations[id]
		if !ok {
			return nil, denyAt(stage, GateAuthority, ErrNotFound, "elevation %s does not exist", id)
		}
		agent = v.Agent
		return &event.Event{Kind: event.KindElevationEnded, Actor: by.ID, Session: v.Session,
			ElevationEnd: &event.ElevationEnd{ID: id, Agent: v.Agent, End: event.EndRevoked, Reason: reason}}, nil
	})
	if err == nil {
		k.renewRateBucket(by, agent)
	}
	return rc, err
}

// expireControl records the end of every elevation and quarantine whose
// time has run out (§8.6 tick(), §13.4 tick()), sessions past their
// duration and saga steps past their timeout. The gates never rely on it:
// they compare expiries with each event's time.
func (k *Kernel) expireControl(ctx context.Context) {
	now := event.At(k.cfg.Now())
	k.mu.Lock()
	var ends []*event.Event
	for _, expired := range expiries {
		ends = append(ends, expired(k.ledger, now)...)
	}
	k.mu.Unlock()
	for _, ev := range ends {
		_, err := k.decide(ctx, "expire", func(*ledger.Ledger, event.Instant) (*event.Event, error) {
			c := *ev
			return &c, nil
		})
		switch {
		case err == nil, errors.Is(err, ErrConflict):
		case errors.Is(err, ErrUnavailable):
			return
		default:
			k.logger.Warn("record an expiry", "kind", ev.Kind, "err", err)
		}
	}
}

// expiries are what runs out with time, each the kernel's events that
// record its end as of now.
var expiries = []func(l *ledger.Ledger, now event.Instant) []*event.Event{
	// Elevations past their expiry end (§8.6 tick()).
	func(l *ledger.Ledger, now event.Instant) (ends []*event.Event) {
		for _, v := range l.Elevations {
			if v.Ended == "" && v.Expires.ReachedBy(now) {
				ends = append(ends, &event.Event{Kind: event.KindElevationEnded, Actor: event.KernelActor, Session: v.Session,
					ElevationEnd: &event.ElevationEnd{ID: v.ID, Agent: v.Agent, End: event.EndExpired}})
			}
		}
		return ends
	},
	// Quarantines past their expiry end (§13.4 tick()).
	func(l *ledger.Ledger, now event.Instant) (ends []*event.Event) {
		for _, q := range l.Quarantines {
			if q.Ended == "" && q.ExpiresAt.ReachedBy(now) {
				ends = append(ends, &event.Event{Kind: event.KindQuarantineEnded, Actor: event.KernelActor, Session: q.Session,
					Quarantine: &event.Quarantine{Agent: q.Agent, End: event.EndExpired}})
			}
		}
		return ends
	},
	// Sessions past their duration start terminating.
	func(l *ledger.Ledger, now event.Instant) (ends []*event.Event) {
		for id, se := range l.Sessions {
			if se.Expired(now.Time) && session.CanTransition(se.State, session.Terminating) {
				ends = append(ends, &event.Event{Kind: event.KindSessionChanged, Actor: event.KernelActor, Session: id,
					SessionChange: &event.SessionChange{Op: event.SessionOpState, State: string(session.Terminating), Reason: "session_timeout: max_duration_seconds passed"}})
			}
		}
		return ends
	},
	// Saga steps past their timeout time out.
	func(l *ledger.Ledger, now event.Instant) (ends []*event.Event) {
		for id, s := range l.Sagas {
			if step, deadline, ok := s.StepDeadline(); ok && deadline.ReachedBy(now) {
				ends = append(ends, &event.Event{Kind: event.KindSagaStep, Actor: event.KernelActor, Session: s.Session,
					SagaStep: &event.SagaStep{Saga: id, Step: step, Transition: event.SagaTimedOut, Reason: "step_timeout_seconds passed"}})
			}
		}
		return ends
	},
}

// decideControl decides one control event and returns its receipt.
func (k *Kernel) decideControl(ctx context.Context, stage string, build builder) (*Receipt, error) {
	d, err := k.decide(ctx, stage, build)
	if err != nil {
		return nil, err
	}
	return receiptOf(d, "", ""), nil
}

func newElevationID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "elev-" + hex.EncodeToString(b[:]), nil
}

// RingView is an agent's place in the rings now.
type RingView struct {
	Agent      string             `json:"agent"`
	TrustBP    uint64             `json:"trust_bp"`
	Consensus  bool               `json:"consensus"`
	Assigned   bool               `json:"assigned"`
	BaseRing   ring.Ring          `json:"base_ring"`
	Effective  ring.Ring          `json:"effective_ring"`
	Elevations []ledger.Elevation `json:"elevations"`
	Demote     bool               `json:"should_demote"`
	Limits     ring.Constraints   `json:"constraints"`
	// RateLimit is the agent's request rate at its effective ring and the
	// tokens its bucket holds now (nil when the rate limit is off).
	RateLimit *RateLimitView `json:"rate_limit,omitempty"`
}

// RateLimitView is an agent's token bucket (Execution Control §9): Rate
// requests per second, Burst at most, Tokens left now.
type RateLimitView struct {
	Rate   float64 `json:"rate"`
	Burst  float64 `json:"burst"`
	Tokens float64 `json:"tokens"`
}

// Rings lists the agents the viewer oversees (root: all; an agent: itself)
// with their base and effective rings.
func (k *Kernel) Rings(viewer *Actor) []RingView {
	now := event.At(k.cfg.Now())
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []RingView
	for _, a := range k.ledger.Actors {
		if a.IsHuman() || (viewer.ID != RootID && viewer.ID != a.ID && viewer.ID != a.Creator) {
			continue
		}
		eff, _ := k.ledger.EffectiveRing(a, "", now)
		v := RingView{Agent: a.ID, TrustBP: a.TrustBP, Consensus: a.Consensus, Assigned: a.Ring != nil, BaseRing: a.BaseRing(),
			Effective: eff, Demote: a.Ring != nil && ring.ShouldDemote(a.BaseRing(), ring.Score(a.TrustBP), a.Consensus),
			Limits: k.ledger.ConstraintsFor(eff), Elevations: []ledger.Elevation{}}
		for _, e := range k.ledger.ElevationsOf(a.ID) {
			v.Elevations = append(v.Elevations, *e)
		}
		if k.limiter != nil {
			tokens, lim := k.limiter.Peek(a.ID, eff)
			v.RateLimit = &RateLimitView{Rate: lim.Rate, Burst: lim.Burst, Tokens: math.Floor(tokens)}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b RingView) int { return strings.Compare(a.Agent, b.Agent) })
	return out
}

// DescriptorView is a registered descriptor with what it implies: the ring
// its actions need (§5.2) and its default risk weight (§16.2).
type DescriptorView struct {
	ledger.Descriptor
	RequiredRing ring.Ring `json:"required_ring"`
	RiskWeight   float64   `json:"risk_weight"`
}

// Descriptors lists the registered action descriptors.
func (k *Kernel) Descriptors() []DescriptorView {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []DescriptorView{}
	for _, d := range k.ledger.Descriptors {
		out = append(out, DescriptorView{Descriptor: *d, RequiredRing: d.Descriptor.RequiredRing(), RiskWeight: ring.RiskWeight(d.Descriptor.Reversibility)})
	}
	slices.SortFunc(out, func(a, b DescriptorView) int {
		return strings.Compare(a.Descriptor.Descriptor.ActionID, b.Descriptor.Descriptor.ActionID)
	})
	return out
}
