package ledger

import "testing"

// The kernel sends a signal on its own only on a policy violation:
// SIGPOLICY under every rules version, SIGKILL (seed 002's answer to a
// violation) from RulesPolicyKill on, never another, so a log written
// before RulesPolicyKill cannot hold a kernel's SIGKILL.
func TestKernelSignalsByRulesVersion(t *testing.T) {
	for _, tc := range []struct {
		rules   int
		signal  string
		allowed bool
	}{
		{RulesPolicyKill, "SIGKILL", true},
		{RulesPolicyKill, "SIGPOLICY", true},
		{RulesPolicyKill, "SIGSTOP", false},
		{RulesPolicyKill, "SIGTRUST", false},
		{RulesSealed, "SIGKILL", false},
		{RulesSealed, "SIGPOLICY", true},
		{RulesGoverned, "SIGKILL", false},
	} {
		l := &Ledger{Rules: tc.rules}
		if v := l.kernelMaySend(tc.signal); (v == nil) != tc.allowed {
			t.Errorf("rules %d, kernel sends %s: %v, want allowed %v", tc.rules, tc.signal, v, tc.allowed)
		}
	}
}

// A release adds its rules as one version: what this one adds is all
// version Rules, so a log folds each of them from the same entry on.
func TestThisReleasesRulesAreOneVersion(t *testing.T) {
	for name, v := range map[string]int{"RulesPolicyKill": RulesPolicyKill, "RulesIntentLocks": RulesIntentLocks, "RulesVFS": RulesVFS,
		"RulesSagaBackoff": RulesSagaBackoff, "RulesRetention": RulesRetention} {
		if v != Rules {
			t.Errorf("%s = %d, this release's rules are %d", name, v, Rules)
		}
	}
}
