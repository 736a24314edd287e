package matrixbridge

import (
	"context"
	"fmt"
	"sort"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/inert"
)

// alertState is what the room was last told of the log's health, so that
// each problem is posted once when it starts and once when it ends.
type alertState struct {
	problems map[string]bool // witness problems (why a witness refuses the log)
	evidence map[string]bool // witness name + evidence id
	notReady string
	read     bool // the health was read at least once
}

// checkHealth reads the log's health and posts what changed: a witness
// that started or stopped refusing the log, new equivocation evidence,
// and the log starting or stopping to take writes.
func (b *Bridge) checkHealth(ctx context.Context) {
	h, err := b.watch.Health(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.logger.Warn("matrix bridge: the log's health could not be read", "err", err)
		}
		return
	}
	b.mu.Lock()
	alerts := b.alerts.update(h)
	b.mu.Unlock()
	for _, a := range alerts {
		b.say(ctx, "", inert.Text(a)) // what witnesses say is outside input
	}
}

// update folds a health reading into the state and returns the alerts it
// gives, in a stable order.
func (s *alertState) update(h *api.LogHealth) []string {
	var out []string
	problems := map[string]bool{}
	for _, p := range h.WitnessProblems {
		problems[p] = true
		if !s.problems[p] {
			out = append(out, "ALERT: a witness refuses this log's checkpoints, so no new proof can be published: "+p)
		}
	}
	for _, p := range sortedKeys(s.problems) {
		if !problems[p] {
			out = append(out, "Resolved: the witness no longer refuses the log: "+p)
		}
	}
	evidence := map[string]bool{}
	for _, w := range h.Witnesses {
		for _, e := range w.Evidence {
			key := w.Name + " " + e.ID
			evidence[key] = true
			if !s.evidence[key] {
				out = append(out, fmt.Sprintf("ALERT: EQUIVOCATION: witness %s holds evidence that this log (%s) showed two different trees (sizes %d and %d, seen by %s at %s): %s",
					w.Name, h.Origin, e.Sizes[0], e.Sizes[1], e.Source, e.FoundAt, e.URL))
			}
		}
	}
	switch {
	case h.NotReady != "" && h.NotReady != s.notReady:
		out = append(out, "ALERT: the log takes no writes: "+h.NotReady)
	case h.NotReady == "" && s.notReady != "" && s.read:
		out = append(out, "Resolved: the log takes writes again.")
	}
	s.problems, s.evidence, s.notReady, s.read = problems, evidence, h.NotReady, true
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
