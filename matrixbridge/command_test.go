package matrixbridge

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSpec000_5_1_CommandsReadExactly: what each room message becomes; a
// message that is no command is left alone, and a malformed one is refused
// with a reason.
func TestSpec000_5_1_CommandsReadExactly(t *testing.T) {
	for _, tc := range []struct {
		body, replyHold string
		want            *Command
		err             string
	}{
		{body: "good morning", want: nil},
		{body: "!", want: nil},
		{body: "!help", want: &Command{Verb: "help"}},
		{body: "!HOLDS", want: &Command{Verb: "holds"}},
		{body: "!dashboard", want: &Command{Verb: "dashboard"}},
		{body: "!holds now", err: "takes nothing"},
		{body: "!approve hold-ab12 notes checked", want: &Command{Verb: "approve", Hold: "hold-ab12", Reason: "notes checked"}},
		{body: "!reject hold-ab12", want: &Command{Verb: "reject", Hold: "hold-ab12"}},
		{body: "!reject too early", replyHold: "hold-cd34", want: &Command{Verb: "reject", Hold: "hold-cd34", Reason: "too early"}},
		{body: "> <@annal:x> Hold hold-cd34: …\n\n!approve", replyHold: "hold-cd34", want: &Command{Verb: "approve", Hold: "hold-cd34"}},
		{body: "!approve hold-ef56 ok", replyHold: "hold-cd34", want: &Command{Verb: "approve", Hold: "hold-ef56", Reason: "ok"}},
		{body: "!approve", err: "name the hold"},
		{body: "!history", want: &Command{Verb: "history", Limit: 10}},
		{body: "!history agent-1 5", want: &Command{Verb: "history", Agent: "agent-1", Limit: 5}},
		{body: "!history 7 agent-1", want: &Command{Verb: "history", Agent: "agent-1", Limit: 7}},
		{body: "!history 0", err: "N from 1 to 50"},
		{body: "!history 51", err: "N from 1 to 50"},
		{body: "!history a b", err: "one agent"},
		{body: "!status agent-1", want: &Command{Verb: "status", Agent: "agent-1"}},
		{body: "!status", err: "name one agent"},
		{body: "!kill agent-1 runaway loop", want: &Command{Verb: "kill", Agent: "agent-1", Reason: "runaway loop"}},
		{body: "!freeze agent-1", want: &Command{Verb: "freeze", Agent: "agent-1"}},
		{body: "!stop", err: "name the agent"},
		{body: "!confirm 123456", want: &Command{Verb: "confirm", Code: "123456"}},
		{body: "!confirm", err: "give the code"},
		{body: "!launch agent-1", err: "unknown command !launch"},
		{body: "!status " + strings.Repeat("a", 200), err: "too long for an id"},
		{body: "!approve hold-\u200bx", err: "not an id"},
		{body: "!help " + strings.Repeat("x", MaxMessageBytes), err: "at most 4096 bytes"},
		{body: "!help \xff", err: "valid UTF-8"},
	} {
		got, err := ParseCommand(tc.body, tc.replyHold)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseCommand(%.40q) = %+v, %v; want an error with %q", tc.body, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("ParseCommand(%.40q): %v", tc.body, err)
		case (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want):
			t.Errorf("ParseCommand(%.40q) = %+v, want %+v", tc.body, got, tc.want)
		}
	}
}

// FuzzParseCommand: a room message is outside input; whatever it holds,
// ParseCommand answers a command, nothing, or an error, never a command
// whose ids are not single printable words or whose count is out of range.
func FuzzParseCommand(f *testing.F) {
	for _, seed := range []string{"!help", "!approve hold-1 ok", "> quote\n\n!reject why", "!history agent-1 5", "!kill a b c",
		"!confirm 123456", "!status \u202eagent", "hello", "!", "!history 99999999999999999999"} {
		f.Add(seed, "")
		f.Add(seed, "hold-2")
	}
	f.Fuzz(func(t *testing.T, body, replyHold string) {
		c, err := ParseCommand(body, replyHold)
		if err != nil || c == nil {
			return
		}
		if len(body) > MaxMessageBytes || !utf8.ValidString(body) {
			t.Fatalf("accepted a body of %d bytes, valid UTF-8 %v", len(body), utf8.ValidString(body))
		}
		for _, s := range []string{c.Agent, c.Hold} {
			if strings.ContainsAny(s, " \t\n") || len(s) > 128 {
				t.Fatalf("an id %q that is not one short word", s)
			}
		}
		if c.Verb == "history" && (c.Limit < 1 || c.Limit > maxHistory) {
			t.Fatalf("history limit %d", c.Limit)
		}
		if (c.Verb == "approve" || c.Verb == "reject") && c.Hold == "" {
			t.Fatal("an answer without a hold")
		}
	})
}
