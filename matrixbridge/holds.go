package matrixbridge

import (
	"context"
	"fmt"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/inert"
)

// maxPostsPerPoll bounds how many holds one poll posts, so that a long
// backlog (a bridge started late) does not hold up the room for long.
const maxPostsPerPoll = 20

// checkHolds posts each pending hold not yet posted, and says how each
// posted hold that is no longer pending ended when it was not answered in
// the room (the console, the CLI or its deadline answered it).
func (b *Bridge) checkHolds(ctx context.Context) {
	pending, err := b.watch.Holds(ctx, "pending")
	if err != nil {
		if ctx.Err() == nil {
			b.logger.Warn("matrix bridge: pending holds could not be read", "err", err)
		}
		return
	}
	open := map[string]bool{}
	posts := 0
	for _, h := range pending {
		open[h.ID] = true
		b.mu.Lock()
		_, seen := b.posted[h.ID]
		b.mu.Unlock()
		if seen || posts == maxPostsPerPoll {
			continue // the rest at the next poll: commands are read meanwhile
		}
		posts++
		post := b.say(ctx, "", holdPost(h))
		if post == "" {
			continue // posted again at the next look
		}
		b.mu.Lock()
		b.posted[h.ID], b.byPost[post] = post, h.ID
		b.mu.Unlock()
	}
	b.reportEnded(ctx, open)
}

func (b *Bridge) reportEnded(ctx context.Context, open map[string]bool) {
	b.mu.Lock()
	var ended []string
	for hold := range b.posted {
		if !open[hold] {
			ended = append(ended, hold)
		}
	}
	b.mu.Unlock()
	for _, hold := range ended {
		h, err := b.watch.Hold(ctx, hold)
		if err != nil {
			continue // looked at again at the next poll
		}
		b.mu.Lock()
		post, byRoom := b.posted[hold], b.answered[hold]
		delete(b.posted, hold)
		delete(b.byPost, post)
		delete(b.answered, hold)
		b.mu.Unlock()
		if !byRoom {
			b.say(ctx, post, "Hold "+hold+" ended outside this room: "+holdOutcome(h))
		}
	}
}

// holdPost is what the room reads of a pending hold: who wants what, the
// rule that held it, and the budget it would spend.
func holdPost(h api.Hold) string {
	var s strings.Builder
	fmt.Fprintf(&s, "Hold %s: %s wants to %s %s\n", h.ID, inert.Text(h.Actor), inert.Text(h.Type), inert.Text(h.Target))
	rule := "a hold rule"
	if h.RulePattern != "" {
		rule = "hold_on " + h.RulePattern
	}
	if h.RuleEnvelope != "" {
		rule += " of envelope " + h.RuleEnvelope
	}
	fmt.Fprintf(&s, "rule: %s\n", inert.Text(rule))
	fmt.Fprintf(&s, "budget: %d reserved; the envelope %s has %d left\n", h.Reserved, inert.Text(h.Envelope), h.Remaining)
	if h.Session != "" {
		fmt.Fprintf(&s, "session: %s\n", inert.Text(h.Session))
	}
	if h.Deadline != "" {
		fmt.Fprintf(&s, "deadline: %s\n", inert.Text(h.Deadline))
	}
	fmt.Fprintf(&s, "Answer with !approve %s [REASON] or !reject %s [REASON], or reply to this message with !approve or !reject.", h.ID, h.ID)
	return s.String()
}

// holdOutcome says how an answered hold ended.
func holdOutcome(h *api.Hold) string {
	out := h.Status
	if h.AnsweredBy != "" {
		out += " by " + h.AnsweredBy
	}
	if h.Reason != "" {
		out += ": " + h.Reason
	}
	return inert.Text(out)
}

func (b *Bridge) listHolds(ctx context.Context, h *human) string {
	pending, err := h.client.Holds(ctx, "pending")
	if err != nil {
		return "Could not list the holds: " + failure(err)
	}
	if len(pending) == 0 {
		return "No hold is waiting for " + who(h.actor) + "."
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%d hold(s) waiting:", len(pending))
	for _, p := range pending {
		fmt.Fprintf(&s, "\n%s: %s wants to %s %s (%d reserved)", p.ID, inert.Text(p.Actor), inert.Text(p.Type), inert.Text(p.Target), p.Reserved)
	}
	return s.String()
}

// answerHold approves or rejects a hold with the human's own credential,
// so that the log names them.
func (b *Bridge) answerHold(ctx context.Context, h *human, cmd *Command) string {
	rc, err := h.client.AnswerHold(ctx, cmd.Hold, cmd.Verb, cmd.Reason)
	if err != nil {
		return fmt.Sprintf("Hold %s was not %s: %s", cmd.Hold, pastTense(cmd.Verb), failure(err))
	}
	b.mu.Lock()
	if _, posted := b.posted[cmd.Hold]; posted {
		b.answered[cmd.Hold] = true
	}
	b.mu.Unlock()
	msg := fmt.Sprintf("Hold %s %s by %s, logged at entry %d", cmd.Hold, pastTense(cmd.Verb), who(h.actor), rc.Index)
	if rc.Reason != "" {
		msg += ": " + inert.Text(rc.Reason)
	}
	return msg + "."
}

func pastTense(verb string) string {
	return map[string]string{"approve": "approved", "reject": "rejected", "freeze": "frozen", "stop": "stopped", "kill": "killed"}[verb]
}

// holdOfPost is the hold a post announced ("" if none).
func (b *Bridge) holdOfPost(post id.EventID) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byPost[post]
}
