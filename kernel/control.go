package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/annal-dev/annal/kernel/event"
	"github.com/annal-dev/annal/kernel/internal/ledger"
	"github.com/annal-dev/annal/kernel/ring"
)

// control runs one execution-control decision: it takes the claims on the
// objects the event changes (so no other change to them is in flight and
// the fold stays independent of Tessera's order within a batch), decides
// under the kernel's lock against the ledger, and appends the event that
// decide returns, once it is durable and folded. decide fills in the
// event's kind, actor and parts; control gives it its id and time.
func (k *Kernel) control(ctx context.Context, stage string, claims []string, decide func(now time.Time) (*event.Event, error)) (*Receipt, error) {
	release, err := k.claimAll(ctx, stage, claims)
	if err != nil {
		return nil, err
	}
	defer release()
	now := k.cfg.Now()
	k.mu.Lock()
	var ev *event.Event
	if err = k.failed; err != nil {
		err = denyAt(stage, "", ErrUnavailable, "the kernel has stopped taking work: %v", err)
	} else {
		ev, err = decide(now)
	}
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	id, err := newEventID()
	if err != nil {
		return nil, err
	}
	ev.V, ev.ID, ev.Time = event.Version, id, event.FormatTime(now)
	return k.appendControl(ctx, stage, ev, "", "")
}

// claimAll takes the claims on keys, in one order (so two decisions never
// wait on each other), and returns what releases them.
func (k *Kernel) claimAll(ctx context.Context, stage string, keys []string) (release func(), _ error) {
	keys = slices.Clone(keys)
	sort.Strings(keys)
	keys = slices.Compact(keys)
	for i, key := range keys {
		if err := k.claim(ctx, key); err != nil {
			for _, taken := range keys[:i] {
				k.unclaim(taken)
			}
			return nil, denyAt(stage, "", ErrUnavailable, "%v", err)
		}
	}
	return func() {
		for _, key := range keys {
			k.unclaim(key)
		}
	}, nil
}

// liveActor returns the ledger's record of an active actor. The caller
// holds k.mu.
func (k *Kernel) liveActor(stage, id string) (*Actor, error) {
	a, ok := k.ledger.Actors[id]
	switch {
	case !ok:
		return nil, denyAt(stage, GateActor, ErrUnauthenticated, "actor %s does not exist", id)
	case !a.Active():
		return nil, denyAt(stage, GateActor, ErrForbidden, "actor %s is %s", id, a.Status)
	}
	return a, nil
}

// oversee checks that by is an active human who oversees agent (root or
// its creator) and returns the agent. The caller holds k.mu.
func (k *Kernel) oversee(stage string, by *Actor, agentID string) (*Actor, error) {
	b, err := k.liveActor(stage, by.ID)
	if err != nil {
		return nil, err
	}
	if !b.IsHuman() {
		return nil, denyAt(stage, GateAuthority, ErrForbidden, "%s is an agent: only a human (root or the agent's creator) may do this", b.ID)
	}
	a, ok := k.ledger.Actors[agentID]
	switch {
	case !ok:
		return nil, denyAt(stage, GateAuthority, ErrNotFound, "actor %s does not exist", agentID)
	case a.IsHuman():
		return nil, denyAt(stage, GateAuthority, ErrForbidden, "%s is a human: execution control applies to agents (Axiom 4.1)", a.ID)
	case b.ID != RootID && a.Creator != b.ID:
		return nil, denyAt(stage, GateAuthority, ErrForbidden, "only root or %s's creator oversees it", a.ID)
	}
	return a, nil
}

func checkReason(stage, reason string) error {
	if len(reason) > 1024 {
		return denyAt(stage, GateForm, ErrInvalid, "reason is longer than 1024 bytes")
	}
	return nil
}

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
	if err := checkReason(stage, req.Reason); err != nil {
		return nil, err
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
	rc, err := k.control(ctx, stage, []string{"actor/" + agentID}, func(time.Time) (*event.Event, error) {
		if _, err := k.oversee(stage, by, agentID); err != nil {
			return nil, err
		}
		return &event.Event{Kind: event.KindRingAssigned, Actor: by.ID, Ring: &event.RingAssignment{
			Agent: agentID, TrustBP: uint64(score), Consensus: req.Consensus, Ring: int(assigned), Reason: req.Reason}}, nil
	})
	if err != nil {
		return nil, err
	}
	k.revokeUntrustedElevations(ctx, by, agentID, score)
	return rc, nil
}

// revokeUntrustedElevations ends the agent's elevations that its trust
// score no longer earns (§8.4).
func (k *Kernel) revokeUntrustedElevations(ctx context.Context, by *Actor, agentID string, score ring.Score) {
	k.mu.Lock()
	var ids []string
	for _, v := range k.ledger.ElevationsOf(agentID) {
		if _, denial := ring.DecideElevation(ring.ElevationRequest{Agent: agentID, Current: ring.Ring(v.From), Target: ring.Ring(v.Ring), Attested: true, Trust: &score}, false); denial == ring.InsufficientTrust {
			ids = append(ids, v.ID)
		}
	}
	k.mu.Unlock()
	for _, id := range ids {
		if _, err := k.RevokeElevation(ctx, by, id, "trust score fell below the elevation's threshold (§8.4)"); err != nil {
			k.logger.Warn("revoke elevation after demotion", "elevation", id, "err", err)
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
	return k.control(ctx, stage, []string{"rings"}, func(time.Time) (*event.Event, error) {
		if by.ID != RootID {
			return nil, denyAt(stage, GateAuthority, ErrForbidden, "only root configures the rings")
		}
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
	return k.control(ctx, stage, []string{"descriptor/" + d.ActionID}, func(time.Time) (*event.Event, error) {
		if by.ID != RootID {
			return nil, denyAt(stage, GateAuthority, ErrForbidden, "only root registers action descriptors")
		}
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
	if err := checkReason(stage, req.Reason); err != nil {
		return nil, nil, err
	}
	if req.Reason == "" {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "an elevation needs a reason (§8.2)")
	}
	if req.Session != "" && ring.ValidIdentifier(req.Session) != nil {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "session: %v", ring.ValidIdentifier(req.Session))
	}
	target, err := ring.ParseRing(req.Ring)
	if err != nil {
		return nil, nil, denyAt(stage, GateForm, ErrInvalid, "%v", err)
	}
	id, err := newElevationID()
	if err != nil {
		return nil, nil, err
	}
	rc, err := k.control(ctx, stage, []string{"actor/" + req.Agent}, func(now time.Time) (*event.Event, error) {
		var a *Actor
		var err error
		attested := ""
		if by.ID == req.Agent {
			a, err = k.liveActor(stage, by.ID)
			if err == nil && a.IsHuman() {
				err = denyAt(stage, GateAuthority, ErrInvalid, "%s is a human: humans stand outside the rings", a.ID)
			}
		} else {
			a, err = k.oversee(stage, by, req.Agent)
			attested = by.ID
		}
		if err != nil {
			return nil, err
		}
		if !a.Active() || a.Stopped {
			return nil, denyAt(stage, GateActor, ErrForbidden, "agent %s is %s", a.ID, statusOf(a))
		}
		if err := k.drawToken(stage, by, req.Session, now); err != nil {
			return nil, err
		}
		if req.Session != "" {
			if _, ok := k.ledger.Sessions[req.Session]; !ok {
				return nil, denyAt(stage, GateSession, ErrNotFound, "session %s does not exist", req.Session)
			}
		}
		trust := ring.Score(a.TrustBP)
		var trustp *ring.Score
		if a.Ring != nil {
			trustp = &trust // no recorded score: "trust score is missing" (§8.3)
		}
		// The fold decides with the event's time, which is now.
		active := k.ledger.ActiveElevation(a.ID, req.Session, now)
		ttl, denial := ring.DecideElevation(ring.ElevationRequest{Agent: a.ID, Session: req.Session, Current: a.BaseRing(),
			Target: target, TTL: req.TTL, Attested: attested != "", Reason: req.Reason, Trust: trustp}, active != nil)
		if denial != "" {
			return nil, &ElevationDenied{Denial: denyAt(stage, GateRing, ErrForbidden, "elevation of %s from %s to %s denied: %s", a.ID, a.BaseRing(), target, describeElevationDenial(denial)), Reason: denial}
		}
		return &event.Event{Kind: event.KindElevationGranted, Actor: by.ID, Session: req.Session, Elevation: &event.Elevation{
			ID: id, Agent: a.ID, From: int(a.BaseRing()), Ring: int(target), TrustBP: uint64(trust),
			Expires: event.FormatTime(now.Add(ttl)), AttestedBy: attested, Reason: req.Reason}}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	k.mu.Lock()
	v := *k.ledger.Elevations[id]
	k.mu.Unlock()
	return rc, &v, nil
}

func describeElevationDenial(r ring.DenialReason) string {
	switch r {
	case ring.Ring0Forbidden:
		return "ring_0_forbidden (Ring 0 is never granted through the API, §8.7)"
	case ring.InvalidTarget:
		return "invalid_target (the target must be more privileged than the current ring)"
	case ring.DuplicateElevation:
		return "duplicate_elevation (the agent already holds an elevation in this session)"
	case ring.InsufficientTrust:
		return "insufficient_trust (Ring 1 needs a recorded trust score >= 0.85, Ring 2 >= 0.50, §8.4)"
	case ring.NoSponsorship:
		return "no_sponsorship (Ring 1 needs the attestation of a human who oversees the agent: the human requests it)"
	case ring.ExpiredTTL:
		return "expired_ttl (the requested time to live is negative)"
	}
	return string(r)
}

// RevokeElevation ends an elevation at once (§8.6): the agent itself or a
// human who oversees it may.
func (k *Kernel) RevokeElevation(ctx context.Context, by *Actor, id, reason string) (*Receipt, error) {
	const stage = "elevation"
	if err := checkReason(stage, reason); err != nil {
		return nil, err
	}
	return k.control(ctx, stage, []string{"elevation/" + id}, func(time.Time) (*event.Event, error) {
		v, ok := k.ledger.Elevations[id]
		if !ok {
			return nil, denyAt(stage, GateForm, ErrNotFound, "elevation %s does not exist", id)
		}
		if by.ID != v.Agent {
			if _, err := k.oversee(stage, by, v.Agent); err != nil {
				return nil, err
			}
		}
		if v.Ended != "" {
			return nil, denyAt(stage, GateRing, ErrConflict, "elevation %s already %s", id, v.Ended)
		}
		return &event.Event{Kind: event.KindElevationEnded, Actor: by.ID, Session: v.Session,
			ElevationEnd: &event.ElevationEnd{ID: id, Agent: v.Agent, End: event.EndRevoked, Reason: reason}}, nil
	})
}

// expireControl records the end of every elevation and quarantine whose
// time has run out (§8.6 tick(), §13.4 tick()). The gates never rely on
// it: they compare expiry with the clock themselves.
func (k *Kernel) expireControl(ctx context.Context) {
	now := k.cfg.Now()
	k.mu.Lock()
	var elevations []*ledger.Elevation
	for _, v := range k.ledger.Elevations {
		if v.Ended == "" && expiredAt(v.Expires, now) {
			c := *v
			elevations = append(elevations, &c)
		}
	}
	var quarantines []*ledger.Quarantine
	for _, q := range k.ledger.Quarantines {
		if q.Ended == "" && expiredAt(q.ExpiresAt, now) {
			c := *q
			quarantines = append(quarantines, &c)
		}
	}
	k.mu.Unlock()
	for _, v := range elevations {
		_, err := k.control(ctx, "elevation", []string{"elevation/" + v.ID}, func(time.Time) (*event.Event, error) {
			if cur := k.ledger.Elevations[v.ID]; cur.Ended != "" {
				return nil, denyAt("elevation", GateRing, ErrConflict, "elevation %s already ended", v.ID)
			}
			return &event.Event{Kind: event.KindElevationEnded, Actor: event.KernelActor, Session: v.Session,
				ElevationEnd: &event.ElevationEnd{ID: v.ID, Agent: v.Agent, End: event.EndExpired}}, nil
		})
		if err != nil && !errors.Is(err, ErrConflict) {
			k.logger.Warn("expire elevation", "elevation", v.ID, "err", err)
		}
	}
	for _, q := range quarantines {
		key := ledger.QuarantineKey(q.Agent, q.Session)
		_, err := k.control(ctx, "quarantine", []string{"quarantine/" + key}, func(time.Time) (*event.Event, error) {
			if cur := k.ledger.Quarantines[key]; cur.Ended != "" || cur.StartedAt != q.StartedAt {
				return nil, denyAt("quarantine", GateQuarantine, ErrConflict, "quarantine of %s already ended", q.Agent)
			}
			return &event.Event{Kind: event.KindQuarantineEnded, Actor: event.KernelActor, Session: q.Session,
				Quarantine: &event.Quarantine{Agent: q.Agent, End: event.EndExpired}}, nil
		})
		if err != nil && !errors.Is(err, ErrConflict) {
			k.logger.Warn("expire quarantine", "agent", q.Agent, "err", err)
		}
	}
	k.expireSessions(ctx, now)
	k.timeOutSagaSteps(ctx, now)
}

func newElevationID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "elev-" + hex.EncodeToString(b[:]), nil
}

func statusOf(a *Actor) string {
	if a.Stopped && a.Active() {
		return "stopped (SIGSTOP)"
	}
	return a.Status
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
}

// Rings lists the agents the viewer oversees (root: all; an agent: itself)
// with their base and effective rings.
func (k *Kernel) Rings(viewer *Actor) []RingView {
	now := k.cfg.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []RingView
	for _, a := range k.ledger.Actors {
		if a.IsHuman() || (viewer.ID != RootID && viewer.ID != a.ID && viewer.ID != a.Creator) {
			continue
		}
		eff, _ := k.effectiveRing(a, "", now)
		v := RingView{Agent: a.ID, TrustBP: a.TrustBP, Consensus: a.Consensus, Assigned: a.Ring != nil, BaseRing: a.BaseRing(),
			Effective: eff, Demote: a.Ring != nil && ring.ShouldDemote(a.BaseRing(), ring.Score(a.TrustBP), a.Consensus),
			Limits: k.constraintsFor(eff), Elevations: []ledger.Elevation{}}
		for _, e := range k.ledger.ElevationsOf(a.ID) {
			v.Elevations = append(v.Elevations, *e)
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b RingView) int { return strings.Compare(a.Agent, b.Agent) })
	return out
}

func (k *Kernel) constraintsFor(r ring.Ring) ring.Constraints {
	c := ring.ConstraintsFor(ring.DefaultConstraints(), r)
	if r == ring.Standard {
		c.NetworkAllowlist = slices.Clone(k.ledger.RingConfig.NetworkAllowlist)
	}
	return c
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
