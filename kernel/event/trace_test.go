package event

import (
	"strings"
	"testing"
)

// TestValidTraceID: a trace id is 32 lower-case hex digits, not all zeros
// (W3C Trace Context §3.2.2.3).
func TestValidTraceID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"4bf92f3577b34da6a3ce929d0e0e4736", true},
		{"00000000000000000000000000000001", true},
		{"00000000000000000000000000000000", false},  // all zeros: invalid
		{"4BF92F3577B34DA6A3CE929D0E0E4736", false},  // upper case
		{"4bf92f3577b34da6a3ce929d0e0e473", false},   // 31 digits
		{"4bf92f3577b34da6a3ce929d0e0e47360", false}, // 33 digits
		{"4bf92f3577b34da6a3ce929d0e0e473g", false},
		{"", false},
		{"4bf92f35-77b3-4da6-a3ce-929d0e0e4736", false},
	} {
		if got := ValidTraceID(tc.id); got != tc.want {
			t.Errorf("ValidTraceID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

// TestTraceID_CarriedAndChecked: any kind may carry a trace id, written
// between time and v; Encode refuses a malformed one, and Parse an entry
// holding one.
func TestTraceID_CarriedAndChecked(t *testing.T) {
	for name, e := range map[string]*Event{"action": actionEvent(Mutate), "actor.created": actorCreatedEvent()} {
		e.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		entry := mustEncode(t, e)
		if !strings.Contains(string(entry), `","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","v":1}`) {
			t.Errorf("%s: entry %s does not end with its trace id before v", name, entry)
		}
		back, err := Parse(entry)
		if err != nil || back.TraceID != e.TraceID {
			t.Fatalf("%s: Parse gives %v, %v", name, back, err)
		}
		e.TraceID = "00000000000000000000000000000000"
		if _, err := Encode(e); err == nil || !strings.Contains(err.Error(), "trace_id") {
			t.Errorf("%s: Encode of an all-zero trace id: %v", name, err)
		}
		bad := strings.Replace(string(entry), "4bf92f3577b34da6a3ce929d0e0e4736", "4BF92F3577B34DA6A3CE929D0E0E4736", 1)
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "trace_id") {
			t.Errorf("%s: Parse of an upper-case trace id: %v", name, err)
		}
	}
}
