package quarantine

import (
	"testing"
	"time"
)

func TestSpec13_1_Reasons(t *testing.T) {
	listed := Reasons()
	if len(listed) != 6 {
		t.Fatalf("Reasons() lists %d reasons, §13.1 has 6", len(listed))
	}
	for _, r := range listed {
		if !Reason(r).Valid() {
			t.Errorf("listed reason %q is not valid", r)
		}
	}
	for _, r := range []Reason{"", "MANUAL", "Manual", "rate_limit", "quarantine_timeout", "manual "} {
		if r.Valid() {
			t.Errorf("reason %q is valid", r)
		}
	}
}

func TestSpec13_2_DefaultDuration(t *testing.T) {
	if DefaultDuration != 300*time.Second {
		t.Errorf("DefaultDuration is %v, §13.2 says 300 s", DefaultDuration)
	}
}
