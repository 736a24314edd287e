package capability

import "testing"

func TestIsPrivileged(t *testing.T) {
	for target, want := range map[string]bool{
		"system": true, "system/a": true, "ledger/x/y": true, "ledger": true,
		"systems": false, "a/system": false, "workspace/ledger": false, "sys": false, "Ledger/x": false,
	} {
		if got := IsPrivileged(target); got != want {
			t.Errorf("IsPrivileged(%q) = %v, want %v", target, got, want)
		}
	}
}

// TestAxiom4_3_MayMatchPrivileged checks which patterns reach privileged
// targets, against a list of targets for the "yes" side.
func TestAxiom4_3_MayMatchPrivileged(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    bool
		example string
	}{
		{"**", true, "system"},
		{"*/x", true, "system/x"},
		{"system/*", true, "system/a"},
		{"s*/a", true, "system/a"},
		{"*", true, "ledger"},
		{"l*r/**", true, "ledger"},
		{"**/x", true, "system/x"},
		{"*/**", true, "system"},
		{"ledger", true, "ledger"},
		{"workspace/**", false, ""},
		{"a/system", false, ""},
		{"systems/*", false, ""},
		{"*x/**", false, ""},
		{"s", false, ""},
	} {
		p := MustParsePattern(tc.pattern)
		if got := MayMatchPrivileged(p); got != tc.want {
			t.Errorf("MayMatchPrivileged(%q) = %v, want %v", tc.pattern, got, tc.want)
		}
		if tc.want && (!p.Match(tc.example) || !IsPrivileged(tc.example)) {
			t.Errorf("%q: example %q is not a privileged target it matches", tc.pattern, tc.example)
		}
	}
	if MayMatchPrivileged(Pattern{}) {
		t.Error("the zero Pattern may match a privileged target")
	}
}
