package event

import (
	"fmt"
	"regexp"

	"github.com/annal-dev/annal/kernel/ring"
)

// The kinds of event that bracket a ring elevation (Execution Control §8).
const (
	// KindElevationGranted records a time-bounded ring elevation (§8).
	KindElevationGranted Kind = "elevation.granted"
	// KindElevationEnded records an elevation revoked or expired.
	KindElevationEnded Kind = "elevation.ended"
)

var elevationIDPattern = regexp.MustCompile(`^elev-[0-9a-f]{12,32}$`)

// ValidElevationID reports whether id can name an elevation.
func ValidElevationID(id string) bool { return elevationIDPattern.MatchString(id) }

// Elevation is carried by elevation.granted.
type Elevation struct {
	ID      string  `json:"id"`
	Agent   string  `json:"agent"`
	From    int     `json:"from"`
	Ring    int     `json:"ring"`
	TrustBP uint64  `json:"trust_bp"`
	Expires Instant `json:"expires"`
	// AttestedBy is the human whose authenticated request granted a Ring 1
	// elevation (§8.2's sponsor attestation).
	AttestedBy string `json:"attested_by,omitempty"`
	Reason     string `json:"reason"`
}

func (v *Elevation) check(*Event) error {
	switch {
	case !ValidElevationID(v.ID):
		return fmt.Errorf("elevation id %q is not valid", v.ID)
	case !ValidActorID(v.Agent):
		return fmt.Errorf("elevation %s: agent %q is not an actor id", v.ID, v.Agent)
	case !validRing(v.From) || !validRing(v.Ring) || v.Ring == 0 || v.Ring >= v.From:
		return fmt.Errorf("elevation %s from ring %d to ring %d: the target must be more privileged, and never ring 0 (§8.7)", v.ID, v.From, v.Ring)
	case v.TrustBP > 10000:
		return fmt.Errorf("elevation %s: trust_bp %d is more than 10000", v.ID, v.TrustBP)
	case v.Expires.IsZero():
		return fmt.Errorf("elevation %s has no expiry (§8.5: elevations are time-bounded)", v.ID)
	}
	if err := v.checkAttestation(); err != nil {
		return err
	}
	if v.Reason == "" {
		return fmt.Errorf("elevation %s has no reason (§8.2: an elevation needs one)", v.ID)
	}
	if err := validateTime("elevation expiry", v.Expires); err != nil {
		return err
	}
	return validateText("elevation reason", v.Reason, 1024)
}

// checkAttestation checks the sponsor's attestation: an elevation to
// Ring 1 needs one (§8.3).
func (v *Elevation) checkAttestation() error {
	if v.Ring == int(ring.Privileged) && v.AttestedBy == "" {
		return fmt.Errorf("elevation %s to ring 1 has no attestation (§8.3 no_sponsorship)", v.ID)
	}
	if v.AttestedBy != "" && !ValidActorID(v.AttestedBy) {
		return fmt.Errorf("elevation %s: attested_by %q is not an actor id", v.ID, v.AttestedBy)
	}
	return nil
}

// Ends of an elevation or a quarantine.
const (
	EndExpired  = "expired"
	EndRevoked  = "revoked"
	EndReleased = "released"
	// EndUntrusted: the kernel ended an elevation that its agent's recorded
	// trust score no longer earns (after a demotion, §8.4).
	EndUntrusted = "untrusted"
)

// ElevationEnd is carried by elevation.ended.
type ElevationEnd struct {
	ID     string `json:"id"`
	Agent  string `json:"agent"`
	End    string `json:"end"`
	Reason string `json:"reason,omitempty"`
}

func (v *ElevationEnd) check(*Event) error {
	switch {
	case !ValidElevationID(v.ID) || !ValidActorID(v.Agent):
		return fmt.Errorf("elevation end names %q of %q: not valid ids", v.ID, v.Agent)
	case v.End != EndExpired && v.End != EndRevoked && v.End != EndUntrusted:
		return fmt.Errorf("elevation %s: end %q is not expired, revoked or untrusted", v.ID, v.End)
	}
	return validateText("elevation end reason", v.Reason, 1024)
}

// The parts of its kinds (parts.go).
func init() {
	kinds[KindElevationGranted] = carries(must("elevation"), may("session"))
	kinds[KindElevationEnded] = carries(must("elevation_end"), may("session"))
}
