package ring

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSpec21_2_RingEnforcement covers §6.1's allow and deny decisions for
// every pair of rings, and the fail-closed handling of invalid rings.
func TestSpec21_2_RingEnforcement(t *testing.T) {
	for _, tc := range []struct {
		agent, required Ring
		allowed         bool
		consensus, sre  bool
		reason          string
	}{
		{Root, Root, false, false, true, "SRE Witness"},
		{Privileged, Root, false, false, true, "SRE Witness"},
		{Sandbox, Root, false, false, true, "SRE Witness"},
		{Ring(-1), Root, false, false, true, "SRE Witness"},
		{Root, Privileged, true, false, false, "allowed"},
		{Privileged, Privileged, true, false, false, "allowed"},
		{Standard, Privileged, false, true, false, "less privileged"},
		{Sandbox, Privileged, false, true, false, "less privileged"},
		{Privileged, Standard, true, false, false, "allowed"},
		{Standard, Standard, true, false, false, "allowed"},
		{Sandbox, Standard, false, false, false, "less privileged"},
		{Sandbox, Sandbox, true, false, false, "allowed"},
		{Standard, Sandbox, true, false, false, "allowed"},
		{Root, Sandbox, true, false, false, "allowed"},
		// Fail closed (§19.1): -1 would otherwise compare as the most privileged.
		{Ring(-1), Privileged, false, false, false, "agent ring -1"},
		{Ring(-1), Sandbox, false, false, false, "agent ring -1"},
		{Ring(4), Sandbox, false, false, false, "agent ring 4"},
		{Privileged, Ring(-1), false, false, false, "required ring -1"},
		{Privileged, Ring(4), false, false, false, "required ring 4"},
	} {
		got := Check(tc.agent, tc.required, 9000)
		if got.Allowed != tc.allowed || got.RequiresConsensus != tc.consensus || got.RequiresSREWitness != tc.sre {
			t.Errorf("Check(%v, %v) = %+v; want allowed %v consensus %v sre %v", tc.agent, tc.required, got, tc.allowed, tc.consensus, tc.sre)
		}
		if !strings.Contains(got.Reason, tc.reason) {
			t.Errorf("Check(%v, %v).Reason = %q, want it to mention %q", tc.agent, tc.required, got.Reason, tc.reason)
		}
		if got.AgentRing != tc.agent || got.RequiredRing != tc.required || got.EffScore != 9000 {
			t.Errorf("Check(%v, %v) recorded %+v", tc.agent, tc.required, got)
		}
	}
}

// TestSpec6_1_Ring0NeverAllowed: no agent ring and no score reaches a Root
// action (§21.1: Ring 0 denied to agents via standard enforcement).
func TestSpec6_1_Ring0NeverAllowed(t *testing.T) {
	for a := Ring(-3); a <= 6; a++ {
		for _, s := range []Score{0, 7000, 10000, 65535} {
			if r := Check(a, Root, s); r.Allowed || !r.RequiresSREWitness {
				t.Fatalf("Check(%v, Root, %d) = %+v", a, s, r)
			}
		}
	}
}

func TestSpec6_2_CheckResultJSON(t *testing.T) {
	b, err := json.Marshal(Check(Standard, Privileged, 9700))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"allowed", "required_ring", "agent_ring", "eff_score", "reason", "requires_consensus", "requires_sre_witness", "denied_resources"} {
		if _, ok := m[k]; !ok {
			t.Errorf("CheckResult JSON %s lacks %q", b, k)
		}
	}
	if len(m) != 8 {
		t.Errorf("CheckResult JSON has %d members, want 8: %s", len(m), b)
	}
	if m["eff_score"] != float64(9700) || m["required_ring"] != float64(1) || m["agent_ring"] != float64(2) {
		t.Errorf("CheckResult JSON %s", b)
	}
	if _, ok := m["denied_resources"].([]any); !ok {
		t.Errorf("denied_resources is not a list: %s", b)
	}
}

func BenchmarkCheck(b *testing.B) {
	for b.Loop() {
		Check(Standard, Privileged, 9000)
	}
}
