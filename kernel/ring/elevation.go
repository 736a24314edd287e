package ring

import "time"

// Elevation time bounds (§8.5).
const (
	// DefaultElevationTTL is the TTL of an elevation requested without one.
	DefaultElevationTTL = 300 * time.Second
	// MaxElevationTTL is the longest elevation; longer requests are clamped.
	MaxElevationTTL = 3600 * time.Second
)

// ElevationRequest is a request to run at a more privileged ring for a while
// (§8.2).
type ElevationRequest struct {
	Agent   string
	Session string
	Current Ring
	Target  Ring
	// TTL is the requested duration: 0 asks for DefaultElevationTTL.
	TTL time.Duration
	// Attested reports whether a sponsor attestation came with the request
	// and the kernel verified it. Elevation to Privileged needs it.
	Attested bool
	Reason   string
	// Trust is the agent's current trust score, or nil when unknown.
	Trust *Score
}

// DenialReason says why an elevation was denied (§8.3). Its values are the
// specification's names.
type DenialReason string

// The denial reasons of §8.3, but for community_edition, which §8.3
// reserves and Annal never gives.
const (
	// InvalidTarget: the target is not more privileged than the current
	// ring, or either ring is invalid.
	InvalidTarget DenialReason = "invalid_target"
	// Ring0Forbidden: the target is Root (§8.7).
	Ring0Forbidden DenialReason = "ring_0_forbidden"
	// DuplicateElevation: the agent already has an active elevation in
	// this session.
	DuplicateElevation DenialReason = "duplicate_elevation"
	// InsufficientTrust: the trust score is missing, invalid or below the
	// target's threshold (§8.4).
	InsufficientTrust DenialReason = "insufficient_trust"
	// NoSponsorship: elevation to Privileged without an attestation.
	NoSponsorship DenialReason = "no_sponsorship"
	// ExpiredTTL: reserved by §8.3; Annal uses it for a negative TTL, a
	// request for an elevation that would have expired before it began.
	ExpiredTTL DenialReason = "expired_ttl"
)

// ElevationMinTrust returns the least trust score an elevation to target
// needs (§8.4) and whether target can be reached by elevation at all.
func ElevationMinTrust(target Ring) (Score, bool) {
	switch target {
	case Privileged:
		return ElevationRing1MinTrust, true
	case Standard:
		return ElevationRing2MinTrust, true
	}
	return 0, false
}

// DecideElevation decides an elevation request (§8). It returns the granted
// TTL and "" when granted, or 0 and the first reason that applies, checked
// in this order:
//  1. Ring0Forbidden: the target is Root (§8.7), whatever else holds.
//  2. InvalidTarget: either ring is invalid, or the target is not more
//     privileged than the current ring.
//  3. DuplicateElevation: hasActive, the agent already has an active
//     elevation in this session.
//  4. InsufficientTrust: Trust is nil or invalid, or below the target's
//     threshold (>= 0.85 for Privileged, >= 0.50 for Standard, §8.4).
//  5. NoSponsorship: the target is Privileged and the request is not
//     Attested.
//  6. ExpiredTTL: the TTL is negative. No §8.3 reason names it; a negative
//     duration asks for an elevation that ends before it starts, which is
//     what the reserved expired_ttl describes. invalid_target would
//     mislead, since the target is fine.
//
// A TTL of 0 gives DefaultElevationTTL; a TTL over MaxElevationTTL is
// clamped to it (§8.5).
func DecideElevation(req ElevationRequest, hasActive bool) (ttl time.Duration, denial DenialReason) {
	switch {
	case req.Target == Root:
		return 0, Ring0Forbidden
	case !req.Target.MorePrivilegedThan(req.Current):
		return 0, InvalidTarget
	case hasActive:
		return 0, DuplicateElevation
	}
	min, ok := ElevationMinTrust(req.Target)
	if !ok || req.Trust == nil || !req.Trust.Valid() || *req.Trust < min {
		return 0, InsufficientTrust
	}
	if req.Target == Privileged && !req.Attested {
		return 0, NoSponsorship
	}
	switch {
	case req.TTL < 0:
		return 0, ExpiredTTL
	case req.TTL == 0:
		return DefaultElevationTTL, ""
	case req.TTL > MaxElevationTTL:
		return MaxElevationTTL, ""
	}
	return req.TTL, ""
}

// ChildRing returns the ring of a child agent that its parent, running at
// parentEffective (its elevated ring if it has one), asks to register at
// requested (§8.8). The child never exceeds the parent: the result is the
// less privileged of the two. It is never Root either, even under a Root
// parent: registering a child is the standard API, through which Root is
// never given (§20.1); such a child gets Privileged. An invalid ring on
// either side gives Sandbox (fail closed).
func ChildRing(parentEffective, requested Ring) Ring {
	if !parentEffective.Valid() || !requested.Valid() {
		return Sandbox
	}
	r := max(parentEffective, requested)
	return max(r, Privileged)
}
