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
