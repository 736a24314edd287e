package logstore

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// WitnessWatch sees every answer a witness gives to the kernel's
// add-checkpoint requests (it is the HTTP transport Tessera's witness
// client uses) and remembers, per witness, why it refused the last one. A
// witness that does not know the log, or trusts another key for its
// origin, refuses every checkpoint forever: without this, the only sign is
// that no checkpoint is published and every wait for a proof hangs. The
// refusal is logged as an error once per cause, served in readiness and
// health, and put in the answer of a proof that cannot be published yet.
type WitnessWatch struct {
	origin, verifierKey string
	logger              *slog.Logger
	next                http.RoundTripper
	now                 func() time.Time

	mu      sync.Mutex
	trouble map[string]witnessTrouble // by witness base URL
}

type witnessTrouble struct {
	problem string
	since   time.Time
	// lasting: the witness's configuration refuses this log (404, 403),
	// which no retry changes; waits give up at once.
	lasting bool
}

func NewWitnessWatch(origin, verifierKey string, logger *slog.Logger, now func() time.Time) *WitnessWatch {
	return &WitnessWatch{origin: origin, verifierKey: verifierKey, logger: logger, next: http.DefaultTransport, now: now,
		trouble: map[string]witnessTrouble{}}
}

func (w *WitnessWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	base, isAdd := strings.CutSuffix(req.URL.String(), "/add-checkpoint")
	if !isAdd {
		return resp, err
	}
	switch {
	case err != nil:
		w.note(base, fmt.Sprintf("the witness at %s cannot be reached: %v", base, err), false)
	case resp.StatusCode == http.StatusNotFound:
		w.note(base, fmt.Sprintf("the witness at %s does not know this log (404 for origin %q): add it there, e.g. `annal-witness logs add --origin %q --key %q`",
			base, w.origin, w.origin, w.verifierKey), true)
	case resp.StatusCode == http.StatusForbidden:
		w.note(base, fmt.Sprintf("the witness at %s trusts another key for origin %q (403): its log key must be %q", base, w.origin, w.verifierKey), true)
	case resp.StatusCode >= 500:
		w.note(base, fmt.Sprintf("the witness at %s fails: %s", base, resp.Status), false)
	default:
		// 200, and 409 (a size hint Tessera follows), are the protocol working.
		w.clear(base)
	}
	return resp, err
}

func (w *WitnessWatch) note(base, problem string, lasting bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, had := w.trouble[base]
	if had && old.problem == problem {
		return
	}
	w.trouble[base] = witnessTrouble{problem: problem, since: w.now(), lasting: lasting}
	w.logger.Error("a witness refuses this log's checkpoints: none is published until the policy's quorum cosigns", "witness", base, "problem", problem)
}

func (w *WitnessWatch) clear(base string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.trouble[base]; ok {
		delete(w.trouble, base)
		w.logger.Info("the witness cosigns again", "witness", base, "after", w.now().Sub(t.since).Round(time.Millisecond))
	}
}

// Problems lists the refusals that have lasted at least patience, and
// those no retry changes, sorted.
func (w *WitnessWatch) Problems(patience time.Duration) []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	now := w.now()
	for _, t := range w.trouble {
		if t.lasting || now.Sub(t.since) >= patience {
			out = append(out, t.problem)
		}
	}
	slices.Sort(out)
	return out
}
