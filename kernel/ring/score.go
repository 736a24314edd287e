package ring

import (
	"fmt"
	"math"
)

// Score is a trust score in basis points: 0 is 0.0 and 10000 is 1.0, so
// 0.97 is 9700. Thresholds are exact integers and events never carry floats.
// A Score above 10000 is invalid and is treated by every decision as if it
// were 0 (fail closed).
type Score uint16

// MaxScore is 1.0.
const MaxScore Score = 10000

// Trust thresholds (§4.2, §8.4), in basis points.
const (
	// Ring1TrustThreshold: a score strictly above it, with consensus, is
	// assigned Privileged (§4.1).
	Ring1TrustThreshold Score = 9500
	// Ring2TrustThreshold: a score strictly above it is assigned Standard.
	Ring2TrustThreshold Score = 6000
	// The specification's RING_1_ENFORCER_THRESHOLD (0.70, §4.2) has no
	// constant: Check does not use it, because §6.1 says access MUST be
	// granted once the ring conditions pass, and the reference enforcer
	// does not consult it either.
	// ElevationRing1MinTrust: elevation to Privileged needs a score at least
	// this (§8.4).
	ElevationRing1MinTrust Score = 8500
	// ElevationRing2MinTrust: elevation to Standard needs a score at least
	// this (§8.4).
	ElevationRing2MinTrust Score = 5000
)

// ScoreFromFloat converts a score in [0.0, 1.0] to basis points, rounding to
// the nearest basis point (halves away from zero). It refuses NaN, the
// infinities and values outside [0, 1] with an error wrapping
// ErrInvalidValue. Because of the rounding, a float within half a basis
// point above a threshold (0.95000001) becomes the threshold itself and so
// does not pass a strict comparison: precision finer than 0.0001 is not
// meaningful for a trust score and is not kept.
func ScoreFromFloat(f float64) (Score, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1 {
		return 0, fmt.Errorf("score %v: %w: a score is a number in [0.0, 1.0]", f, ErrInvalidValue)
	}
	return Score(math.Round(f * 10000)), nil
}

// Float returns the score as a number in [0.0, 1.0].
func (s Score) Float() float64 { return float64(s) / 10000 }

// Valid reports whether s is at most 10000.
func (s Score) Valid() bool { return s <= MaxScore }

// String writes the score with four decimals, such as "0.9700".
func (s Score) String() string {
	if !s.Valid() {
		return fmt.Sprintf("invalid score %d bp", uint16(s))
	}
	return fmt.Sprintf("%d.%04d", s/10000, s%10000)
}

// effective returns s, or 0 when s is invalid, so that an invalid score
// never passes a threshold.
func (s Score) effective() Score {
	if !s.Valid() {
		return 0
	}
	return s
}

// FromEffScore assigns a ring from an effective score (§4.1): Privileged when
// s > 0.95 and consensus holds, Standard when s > 0.60, Sandbox otherwise.
// Comparisons are strict. Root is never assigned by score. An invalid score
// gives Sandbox.
func FromEffScore(s Score, consensus bool) Ring {
	s = s.effective()
	switch {
	case s > Ring1TrustThreshold && consensus:
		return Privileged
	case s > Ring2TrustThreshold:
		return Standard
	default:
		return Sandbox
	}
}

// ShouldDemote reports whether an agent at current should be demoted given
// its score (§4.3): whether FromEffScore(s, consensus) is less privileged
// than current. Consensus counts, so a Privileged agent whose consensus has
// lapsed is demoted to Standard.
//
// An agent at Root is never demoted by score: Root is not reached through a
// score (§4.1) but through out-of-band SRE attestation (§20.1), so a score
// is not what governs it, and letting a score feed unseat the system actor
// would hand Root's fate to whatever computes scores. Removing Root is an
// explicit operator act. An invalid current ring is always demoted (true):
// fail closed, the caller should replace it with the computed ring.
func ShouldDemote(current Ring, s Score, consensus bool) bool {
	if !current.Valid() {
		return true
	}
	if current == Root {
		return false
	}
	return current.MorePrivilegedThan(FromEffScore(s, consensus))
}
