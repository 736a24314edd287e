package matrixbridge

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessageBytes bounds a room message the bridge reads as a command; a
// longer one is refused.
const MaxMessageBytes = 4096

// maxHistory is the most entries !history shows.
const maxHistory = 50

// Command is one room message read as a command. Verbs and what they take:
//
//	!help
//	!dashboard                      the log, its witnesses, the holds waiting, the agents
//	!holds                          the pending holds
//	!approve HOLD [REASON...]       (HOLD may be left out in a reply to the hold's post)
//	!reject HOLD [REASON...]
//	!history [AGENT] [N]            the newest N entries (default 10, at most 50), of AGENT if given
//	!status AGENT                   its ring, energy and standing
//	!freeze|!stop|!kill AGENT [REASON...]   asks for a confirmation
//	!confirm CODE
type Command struct {
	Verb   string
	Hold   string // approve, reject
	Agent  string // history, status, freeze, stop, kill
	Reason string // approve, reject, freeze, stop, kill
	Limit  int    // history
	Code   string // confirm
}

// ParseCommand reads a message body. It returns (nil, nil) for a message
// that is no command (it does not start with "!"), and an error saying what
// is wrong with a command it cannot read. inReplyToHold is the hold whose
// post the message replies to ("" if none): approve and reject may then
// leave the hold out.
func ParseCommand(body, inReplyToHold string) (*Command, error) {
	command := stripReplyFallback(body)
	if !strings.HasPrefix(command, "!") {
		return nil, nil
	}
	// The whole message is judged, its quoted reply fallback too: a
	// command is not taken from a message that is not text.
	if len(body) > MaxMessageBytes {
		return nil, fmt.Errorf("a command is at most %d bytes", MaxMessageBytes)
	}
	if !utf8.ValidString(body) {
		return nil, fmt.Errorf("a command must be valid UTF-8")
	}
	fields := strings.Fields(command[1:])
	if len(fields) == 0 {
		return nil, nil
	}
	c := &Command{Verb: strings.ToLower(fields[0])}
	parse, ok := parsers[c.Verb]
	if !ok {
		return nil, fmt.Errorf("unknown command !%s: !help lists them", c.Verb)
	}
	if err := parse(c, fields[1:], inReplyToHold); err != nil {
		return nil, err
	}
	return c, nil
}

// parsers read each verb's arguments into the command.
var parsers = map[string]func(c *Command, args []string, inReplyToHold string) error{
	"help":      func(c *Command, args []string, _ string) error { return noArgs(c.Verb, args) },
	"holds":     func(c *Command, args []string, _ string) error { return noArgs(c.Verb, args) },
	"dashboard": func(c *Command, args []string, _ string) error { return noArgs(c.Verb, args) },
	"approve":   (*Command).parseAnswer,
	"reject":    (*Command).parseAnswer,
	"history":   func(c *Command, args []string, _ string) error { return c.parseHistory(args) },
	"status":    func(c *Command, args []string, _ string) error { return c.parseStatus(args) },
	"freeze":    func(c *Command, args []string, _ string) error { return c.parseControl(args) },
	"stop":      func(c *Command, args []string, _ string) error { return c.parseControl(args) },
	"kill":      func(c *Command, args []string, _ string) error { return c.parseControl(args) },
	"confirm":   func(c *Command, args []string, _ string) error { return c.parseConfirm(args) },
}

func (c *Command) parseStatus(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("!status AGENT: name one agent")
	}
	c.Agent = args[0]
	return checkID("agent", c.Agent)
}

func (c *Command) parseControl(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("!%s AGENT [REASON]: name the agent", c.Verb)
	}
	c.Agent, c.Reason = args[0], strings.Join(args[1:], " ")
	return checkID("agent", c.Agent)
}

func (c *Command) parseConfirm(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("!confirm CODE: give the code the bridge answered")
	}
	c.Code = args[0]
	return nil
}

func noArgs(verb string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("!%s takes nothing after it", verb)
	}
	return nil
}

func (c *Command) parseAnswer(args []string, inReplyToHold string) error {
	switch {
	case len(args) > 0 && looksLikeHold(args[0]):
		c.Hold, c.Reason = args[0], strings.Join(args[1:], " ")
	case inReplyToHold != "":
		c.Hold, c.Reason = inReplyToHold, strings.Join(args, " ")
	case len(args) > 0:
		c.Hold, c.Reason = args[0], strings.Join(args[1:], " ")
	default:
		return fmt.Errorf("!%s HOLD [REASON]: name the hold, or reply to its post", c.Verb)
	}
	return checkID("hold", c.Hold)
}

func (c *Command) parseHistory(args []string) error {
	c.Limit = 10
	if len(args) > 2 {
		return fmt.Errorf("!history [AGENT] [N]: at most an agent and a count")
	}
	for _, a := range args {
		if n, err := strconv.Atoi(a); err == nil {
			if n < 1 || n > maxHistory {
				return fmt.Errorf("!history: N from 1 to %d", maxHistory)
			}
			c.Limit = n
			continue
		}
		if c.Agent != "" {
			return fmt.Errorf("!history [AGENT] [N]: one agent")
		}
		c.Agent = a
		if err := checkID("agent", a); err != nil {
			return err
		}
	}
	return nil
}

// looksLikeHold says whether a word is a hold id rather than the first
// word of a reason.
func looksLikeHold(s string) bool { return strings.HasPrefix(s, "hold-") }

// checkID refuses what cannot be an id: the kernel decides whether it
// names anything, but an id is one printable word of modest length.
func checkID(what, s string) error {
	if len(s) > 128 {
		return fmt.Errorf("%s %.20q…: too long for an id", what, s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%s %q: not an id", what, s)
		}
	}
	return nil
}

// stripReplyFallback drops the quoted lines ("> …") a Matrix client puts
// before a reply's text, and the blank line after them.
func stripReplyFallback(body string) string {
	if !strings.HasPrefix(body, "> ") {
		return strings.TrimSpace(body)
	}
	lines := strings.Split(body, "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], ">") {
		i++
	}
	return strings.TrimSpace(strings.Join(lines[i:], "\n"))
}

const helpText = `Commands (your Matrix account must be mapped to an Annal human):
!dashboard — the log, its witnesses, the holds waiting for you, the agents you oversee
!holds — the pending holds
!approve HOLD [REASON] / !reject HOLD [REASON] — answer a hold (or reply to its post with !approve / !reject)
!history [AGENT] [N] — the newest N entries (default 10), of AGENT if given
!status AGENT — its ring, energy and standing
!freeze AGENT [REASON] / !stop AGENT [REASON] / !kill AGENT [REASON] — carried out after !confirm CODE
!confirm CODE — carry out what you asked for`
