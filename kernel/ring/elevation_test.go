package ring

import (
	"testing"
	"time"
)

func sp(s Score) *Score { return &s }

func TestSpec22_3_ElevationDenial(t *testing.T) {
	ttl, why := DecideElevation(ElevationRequest{Agent: "a", Session: "s", Current: Standard, Target: Privileged, Trust: sp(mustScore(t, 0.60)), Attested: true}, false)
	if why != InsufficientTrust || ttl != 0 {
		t.Errorf("Ring 2 -> 1 with trust 0.60: %v, %q; want insufficient_trust", ttl, why)
	}
	ttl, why = DecideElevation(ElevationRequest{Agent: "a", Session: "s", Current: Standard, Target: Root}, false)
	if why != Ring0Forbidden || ttl != 0 {
		t.Errorf("Ring 2 -> 0: %v, %q; want ring_0_forbidden", ttl, why)
	}
}

// TestSpec21_2_ElevationApprovalAndDenial covers every §8.3 reason, the
// order they are checked in, the §8.4 thresholds (>=) and the §8.5 TTLs.
func TestSpec21_2_ElevationApprovalAndDenial(t *testing.T) {
	base := ElevationRequest{Agent: "a", Session: "s", Current: Standard, Target: Privileged, Trust: sp(9000), Attested: true, Reason: "deploy"}
	with := func(f func(*ElevationRequest)) ElevationRequest { r := base; f(&r); return r }
	for _, tc := range []struct {
		name   string
		req    ElevationRequest
		active bool
		ttl    time.Duration
		why    DenialReason
	}{
		{"granted default ttl", base, false, DefaultElevationTTL, ""},
		{"granted ttl", with(func(r *ElevationRequest) { r.TTL = time.Minute }), false, time.Minute, ""},
		{"granted max ttl", with(func(r *ElevationRequest) { r.TTL = MaxElevationTTL }), false, MaxElevationTTL, ""},
		{"ttl clamped", with(func(r *ElevationRequest) { r.TTL = 24 * time.Hour }), false, MaxElevationTTL, ""},
		{"negative ttl", with(func(r *ElevationRequest) { r.TTL = -time.Second }), false, 0, ExpiredTTL},
		{"trust exactly 0.85", with(func(r *ElevationRequest) { r.Trust = sp(8500) }), false, DefaultElevationTTL, ""},
		{"trust 0.8499", with(func(r *ElevationRequest) { r.Trust = sp(8499) }), false, 0, InsufficientTrust},
		{"trust nil", with(func(r *ElevationRequest) { r.Trust = nil }), false, 0, InsufficientTrust},
		{"trust invalid", with(func(r *ElevationRequest) { r.Trust = sp(20000) }), false, 0, InsufficientTrust},
		{"no attestation", with(func(r *ElevationRequest) { r.Attested = false }), false, 0, NoSponsorship},
		{"duplicate", base, true, 0, DuplicateElevation},
		{"to ring 2 at 0.50", with(func(r *ElevationRequest) {
			r.Current, r.Target, r.Trust, r.Attested = Sandbox, Standard, sp(5000), false
		}), false, DefaultElevationTTL, ""},
		{"to ring 2 at 0.4999", with(func(r *ElevationRequest) { r.Current, r.Target, r.Trust = Sandbox, Standard, sp(4999) }), false, 0, InsufficientTrust},
		{"sandbox to ring 1", with(func(r *ElevationRequest) { r.Current = Sandbox }), false, DefaultElevationTTL, ""},
		{"same ring", with(func(r *ElevationRequest) { r.Current = Privileged }), false, 0, InvalidTarget},
		{"lower ring", with(func(r *ElevationRequest) { r.Target = Sandbox }), false, 0, InvalidTarget},
		{"invalid target", with(func(r *ElevationRequest) { r.Target = Ring(-1) }), false, 0, InvalidTarget},
		{"invalid current", with(func(r *ElevationRequest) { r.Current = Ring(9) }), false, 0, InvalidTarget},
		{"from root", with(func(r *ElevationRequest) { r.Current = Root }), false, 0, InvalidTarget},
		// Order: ring_0_forbidden beats everything, invalid_target beats
		// duplicate, duplicate beats trust, trust beats sponsorship,
		// sponsorship beats the TTL.
		{"root with all else wrong", with(func(r *ElevationRequest) {
			r.Target, r.Current, r.Trust, r.Attested, r.TTL = Root, Root, nil, false, -1
		}), true, 0, Ring0Forbidden},
		{"invalid before duplicate", with(func(r *ElevationRequest) { r.Target = Standard }), true, 0, InvalidTarget},
		{"duplicate before trust", with(func(r *ElevationRequest) { r.Trust = nil }), true, 0, DuplicateElevation},
		{"trust before sponsorship", with(func(r *ElevationRequest) { r.Trust, r.Attested = nil, false }), false, 0, InsufficientTrust},
		{"sponsorship before ttl", with(func(r *ElevationRequest) { r.Attested, r.TTL = false, -1 }), false, 0, NoSponsorship},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttl, why := DecideElevation(tc.req, tc.active)
			if ttl != tc.ttl || why != tc.why {
				t.Fatalf("DecideElevation = %v, %q; want %v, %q", ttl, why, tc.ttl, tc.why)
			}
		})
	}
}

// TestSpec8_7_Ring0ElevationForbidden: no request reaches Root, whatever
// its trust, attestation or TTL.
func TestSpec8_7_Ring0ElevationForbidden(t *testing.T) {
	for cur := Ring(-1); cur <= 4; cur++ {
		for _, att := range []bool{false, true} {
			ttl, why := DecideElevation(ElevationRequest{Current: cur, Target: Root, Trust: sp(10000), Attested: att, TTL: time.Second}, false)
			if why != Ring0Forbidden || ttl != 0 {
				t.Fatalf("from %v attested %v: %v, %q", cur, att, ttl, why)
			}
		}
	}
}

// TestSpec8_3_DenialReasons pins the reasons' names: they are the codes a
// denied elevation carries.
func TestSpec8_3_DenialReasons(t *testing.T) {
	for r, want := range map[DenialReason]string{
		InvalidTarget: "invalid_target", Ring0Forbidden: "ring_0_forbidden", DuplicateElevation: "duplicate_elevation",
		InsufficientTrust: "insufficient_trust", NoSponsorship: "no_sponsorship", ExpiredTTL: "expired_ttl",
	} {
		if string(r) != want {
			t.Errorf("reason %q, want %q", r, want)
		}
	}
}

func TestSpec8_8_ChildRing(t *testing.T) {
	for _, tc := range []struct {
		parent, requested, want Ring
	}{
		{Standard, Privileged, Standard},
		{Standard, Sandbox, Sandbox},
		{Standard, Standard, Standard},
		{Privileged, Privileged, Privileged},
		{Privileged, Root, Privileged},
		{Root, Root, Privileged},
		{Root, Standard, Standard},
		{Sandbox, Root, Sandbox},
		{Ring(-1), Standard, Sandbox},
		{Standard, Ring(-1), Sandbox},
		{Ring(5), Ring(5), Sandbox},
	} {
		got := ChildRing(tc.parent, tc.requested)
		if got != tc.want {
			t.Errorf("ChildRing(%v, %v) = %v, want %v", tc.parent, tc.requested, got, tc.want)
		}
		if tc.parent.Valid() && got.MorePrivilegedThan(tc.parent) {
			t.Errorf("ChildRing(%v, %v) = %v exceeds the parent", tc.parent, tc.requested, got)
		}
	}
}
