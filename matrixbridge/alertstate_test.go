package matrixbridge

import (
	"strings"
	"testing"

	"github.com/annal-dev/annal/api"
)

// TestAlertsArePostedOnceAndResolved: a witness problem, equivocation
// evidence and a log that takes no writes are each told once when they
// start; a problem and the stop are told again when they end.
func TestAlertsArePostedOnceAndResolved(t *testing.T) {
	var s alertState
	ok := &api.LogHealth{Origin: "example.org/log", Witnesses: []api.WitnessHealth{{Name: "w1", Evidence: []api.WitnessEvidence{}}}}
	if got := s.update(ok); len(got) != 0 {
		t.Fatalf("a healthy log: %q", got)
	}
	bad := &api.LogHealth{Origin: "example.org/log", NotReady: "damaged entry 7", WitnessProblems: []string{"w1 does not know this log"},
		Witnesses: []api.WitnessHealth{{Name: "w1", Evidence: []api.WitnessEvidence{{ID: "ab", Sizes: [2]uint64{5, 5}, Source: "w1", URL: "http://w1/evidence/ab"}}}}}
	got := s.update(bad)
	if len(got) != 3 || !strings.Contains(got[0], "w1 does not know this log") || !strings.Contains(got[1], "EQUIVOCATION: witness w1") ||
		!strings.Contains(got[1], "http://w1/evidence/ab") || !strings.Contains(got[2], "takes no writes: damaged entry 7") {
		t.Fatalf("the first bad reading: %q", got)
	}
	if again := s.update(bad); len(again) != 0 {
		t.Fatalf("the same bad reading again: %q", again)
	}
	got = s.update(ok)
	if len(got) != 2 || !strings.HasPrefix(got[0], "Resolved: the witness") || !strings.HasPrefix(got[1], "Resolved: the log takes writes") {
		t.Fatalf("back to healthy: %q", got)
	}
}
