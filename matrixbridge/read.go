package matrixbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/inert"
)

// history lists the newest entries the human may read, of one agent if
// the command names one, one line each.
func (b *Bridge) history(ctx context.Context, h *human, cmd *Command) string {
	q := url.Values{"order": {"newest"}, "limit": {strconv.Itoa(cmd.Limit)}}
	if cmd.Agent != "" {
		q.Set("actor", cmd.Agent)
	}
	page, err := h.client.History(ctx, q)
	if err != nil {
		return "Could not read the history: " + failure(err)
	}
	if len(page.Events) == 0 {
		return "No entries."
	}
	var s strings.Builder
	s.WriteString("Newest entries")
	if cmd.Agent != "" {
		s.WriteString(" of " + cmd.Agent)
	}
	s.WriteString(":")
	for _, e := range page.Events {
		fmt.Fprintf(&s, "\n%d %s", e.Index, entryLine(e))
	}
	return s.String()
}

// entryLine is one entry as the room reads it: time, actor, kind, and the
// action or the hold answer it carries.
func entryLine(item api.HistoryItem) string {
	ev, err := item.Summary()
	if err != nil {
		return "(an entry this bridge cannot read)"
	}
	line := fmt.Sprintf("%s %s %s", ev.Time, ev.Actor, ev.Kind)
	if a := ev.Action; a != nil {
		line += " " + a.Type + " " + a.Target
	}
	if hd := ev.Hold; hd != nil && hd.ID != "" {
		line += " " + hd.ID
		if hd.Decision != "" {
			line += " " + hd.Decision
		}
		if hd.AnsweredBy != "" {
			line += " by " + hd.AnsweredBy
		}
		if hd.Reason != "" {
			line += ": " + hd.Reason
		}
	}
	return inert.Text(line)
}

// status says an agent's ring, energy and standing (active, frozen or
// terminated, and quarantined when it is).
func (b *Bridge) status(ctx context.Context, h *human, agent string) string {
	a, err := h.client.Actor(ctx, agent)
	if err != nil {
		return "Could not read " + agent + ": " + failure(err)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%s (%s, %s): %s", a.ID, a.Kind, inert.Text(a.Name), a.Status)
	if q := b.quarantine(ctx, h, agent); q != "" {
		s.WriteString(", " + q)
	}
	if r := b.ring(ctx, h, agent); r != "" {
		s.WriteString("\nring: " + r)
	}
	fmt.Fprintf(&s, "\nenergy: %d balance, %d reserved, %d consumed", a.Balance, a.Reserved, a.Consumed)
	return s.String()
}

func (b *Bridge) ring(ctx context.Context, h *human, agent string) string {
	raw, err := h.client.Rings(ctx)
	if err != nil {
		return "unknown (" + failure(err) + ")"
	}
	var rings []struct {
		Agent     string `json:"agent"`
		BaseRing  int    `json:"base_ring"`
		Effective int    `json:"effective_ring"`
		TrustBP   uint64 `json:"trust_bp"`
	}
	if err := json.Unmarshal(raw, &rings); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, r := range rings {
		if r.Agent == agent {
			out := fmt.Sprintf("%d (trust %.2f)", r.Effective, float64(r.TrustBP)/10000)
			if r.Effective != r.BaseRing {
				out += fmt.Sprintf(", base ring %d", r.BaseRing)
			}
			return inert.Text(out)
		}
	}
	return ""
}

func (b *Bridge) quarantine(ctx context.Context, h *human, agent string) string {
	raw, err := h.client.Quarantines(ctx)
	if err != nil {
		return ""
	}
	var qs []struct {
		Agent   string `json:"agent"`
		Reason  string `json:"reason"`
		Session string `json:"session"`
		Ended   string `json:"ended"`
	}
	if json.Unmarshal(raw, &qs) != nil {
		return ""
	}
	for _, q := range qs {
		if q.Agent == agent && q.Ended == "" {
			out := "quarantined"
			if q.Session != "" {
				out += " in session " + q.Session
			}
			if q.Reason != "" {
				out += ": " + q.Reason
			}
			return inert.Text(out)
		}
	}
	return ""
}
