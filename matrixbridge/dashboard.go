package matrixbridge

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/annal-dev/annal/internal/inert"
)

// dashboard is the overview the console's first page gives, in one post:
// the log's size, checkpoint and witnesses, the holds waiting for the
// human, and the agents they oversee with their standing and energy.
func (b *Bridge) dashboard(ctx context.Context, h *human) string {
	var s strings.Builder
	health, err := h.client.Health(ctx)
	if err != nil {
		return "Could not read the log's health: " + failure(err)
	}
	fmt.Fprintf(&s, "Log %s: %d entries, checkpoint at %d", inert.Text(health.Origin), health.Size, health.CheckpointSize)
	if health.CheckpointAgeSeconds >= 0 {
		fmt.Fprintf(&s, " (%.0fs ago)", health.CheckpointAgeSeconds)
	}
	if !health.Ready {
		s.WriteString("; TAKES NO WRITES: " + inert.Text(health.NotReady))
	}
	if health.Quorum != "" {
		fmt.Fprintf(&s, "\nwitnesses: quorum %s, %d problem(s)", inert.Text(health.Quorum), len(health.WitnessProblems))
	}
	pending, err := h.client.Holds(ctx, "pending")
	if err != nil {
		return "Could not list the holds: " + failure(err)
	}
	fmt.Fprintf(&s, "\nholds waiting for %s: %d", who(h.actor), len(pending))
	actors, err := h.client.Actors(ctx)
	if err != nil {
		return "Could not list the agents: " + failure(err)
	}
	sort.Slice(actors, func(i, j int) bool { return actors[i].ID < actors[j].ID })
	for _, a := range actors {
		if a.Kind == "human" {
			continue
		}
		fmt.Fprintf(&s, "\n%s (%s): %s, %d energy", a.ID, inert.Text(a.Name), a.Status, a.Balance)
	}
	return s.String()
}
