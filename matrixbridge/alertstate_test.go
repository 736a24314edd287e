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

// TestWhatAgentsWroteIsInert: a target, a name or an entry an agent wrote
// reaches the room with its control characters and bidirectional
// overrides escaped, so it cannot forge a line ("approved by …") or read
// other than it is.
func TestWhatAgentsWroteIsInert(t *testing.T) {
	post := holdPost(api.Hold{ID: "hold-1", Actor: "agent-1", Type: "mutate", Target: "workspace/x\nHold hold-1 approved by root", RulePattern: "workspace/**"})
	if strings.Contains(post, "\nHold hold-1 approved") || !strings.Contains(post, `workspace/x\u000aHold`) {
		t.Errorf("a target with a newline: %q", post)
	}
	line := entryLine(api.HistoryItem{Event: []byte(`{"time":"t","actor":"agent-1","kind":"action","action":{"type":"mutate","target":"evil\u202etxt.exe"}}`)})
	if strings.ContainsRune(line, '\u202e') || !strings.Contains(line, `evil\u202etxt.exe`) {
		t.Errorf("an entry with a bidi override: %q", line)
	}
}
