package matrixbridge

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"

	"maunium.net/go/mautrix/id"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/internal/inert"
)

// confirmation is a freeze, stop or kill a person asked for and has not yet
// confirmed.
type confirmation struct {
	user    id.UserID
	cmd     Command
	expires int64 // unix nanoseconds
}

// askConfirmation keeps a control command under a fresh code, which only
// the same person may confirm within ConfirmWithin.
func (b *Bridge) askConfirmation(sender id.UserID, cmd *Command) string {
	code, err := newCode()
	if err != nil {
		return "Could not make a confirmation code: " + err.Error()
	}
	b.mu.Lock()
	b.confirms[code] = &confirmation{user: sender, cmd: *cmd, expires: b.now().Add(b.confirmWithin).UnixNano()}
	b.mu.Unlock()
	return fmt.Sprintf("To %s %s, %s replies !confirm %s within %v. Nothing is done until then.", cmd.Verb, cmd.Agent, sender, code, b.confirmWithin)
}

// newCode is a six-digit code from crypto/rand.
func newCode() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

// confirm carries out what sender asked for under code, with their own
// credential. A code another person asked for is refused and stays good.
func (b *Bridge) confirm(ctx context.Context, sender id.UserID, h *human, code string) string {
	b.mu.Lock()
	c := b.confirms[code]
	switch {
	case c == nil || c.expires < b.now().UnixNano():
		delete(b.confirms, code)
		b.mu.Unlock()
		return fmt.Sprintf("No command waits for confirmation under %q (codes last %v). Nothing was done.", code, b.confirmWithin)
	case c.user != sender:
		b.mu.Unlock()
		return fmt.Sprintf("Refused: code %s was asked for by %s; only they may confirm it. Nothing was done.", code, c.user)
	}
	delete(b.confirms, code)
	b.mu.Unlock()
	return b.control(ctx, h, &c.cmd)
}

func (b *Bridge) expireConfirmations() {
	now := b.now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	for code, c := range b.confirms {
		if c.expires < now {
			delete(b.confirms, code)
		}
	}
}

// control freezes (actor status frozen), stops (SIGSTOP) or kills (the
// kill switch, §12) an agent with the human's credential.
func (b *Bridge) control(ctx context.Context, h *human, cmd *Command) string {
	reason := cmd.Reason
	if reason == "" {
		reason = "asked in Matrix by " + who(h.actor)
	}
	var index uint64
	var err error
	switch cmd.Verb {
	case "freeze":
		var rc *api.Receipt
		if rc, err = h.client.SetStatus(ctx, cmd.Agent, "frozen", reason); err == nil {
			index = rc.Index
		}
	case "stop":
		var c *api.Controlled
		if c, err = h.client.Signal(ctx, cmd.Agent, api.SignalRequest{Signal: "SIGSTOP", Reason: reason}); err == nil {
			index = c.Receipt.Index
		}
	case "kill":
		var c *api.Controlled
		// §12.2 names the reasons a kill may give; a person's is "manual",
		// and what they wrote goes in its details.
		if c, err = h.client.Kill(ctx, cmd.Agent, api.KillRequest{Reason: "manual", Details: reason}); err == nil {
			index = c.Receipt.Index
		}
	}
	if err != nil {
		return fmt.Sprintf("%s was not %s: %s", cmd.Agent, pastTense(cmd.Verb), failure(err))
	}
	return fmt.Sprintf("%s %s by %s, logged at entry %d: %s.", cmd.Agent, pastTense(cmd.Verb), who(h.actor), index, inert.Text(reason))
}
