package saga

import (
	"bytes"
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/annal-dev/annal/internal/strictjson"
)

// Compensate is a compensation Annal can run itself (§15.3), so that no
// agent has to be alive to undo a step: a command, run as `annal exec`
// runs one, or a tool call of an MCP server, made through the gate. Either
// way it is an execute, decided by the kernel before it runs and recorded
// after, like any other. Exactly one of Argv or Server and Tool is set.
//
// Its byte form in a saga.started entry is the member "compensate" of a
// step: {"argv": [...]} or {"server", "tool", "arguments"?}, arguments being
// the tool's arguments as the text of a JSON object (text, so that the
// entry keeps them byte for byte; the intent's input_oid is computed from
// them as annal mcp-gate computes it).
type Compensate struct {
	// Argv is the command line: target exec/<base name of Argv[0]>.
	Argv []string `json:"argv,omitempty"`
	// Server names the MCP server as the gate names it (target
	// mcp/<Server>/<Tool>); Tool is the tool called.
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Arguments is the tool's arguments, a JSON object as text ("" for {}).
	Arguments string `json:"arguments,omitempty"`
}

// Limits of a Compensate.
const (
	MaxArgv          = 64
	MaxArgumentBytes = 16 << 10
)

// serverName is how the gate names a server (agentmcp's gate name).
var serverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// IsCommand reports whether c is a command (else a tool call).
func (c *Compensate) IsCommand() bool { return len(c.Argv) > 0 }

// Validate checks that c is a command of 1 to MaxArgv valid UTF-8
// arguments without NUL, each at most MaxNameLength bytes, the first not
// empty; or a tool call of a gate-named server, a tool name of 1 to
// MaxNameLength bytes, and arguments absent or a JSON object (strict: no
// duplicate members, valid UTF-8) of at most MaxArgumentBytes.
func (c *Compensate) Validate() error {
	switch {
	case c.IsCommand() && (c.Server != "" || c.Tool != "" || c.Arguments != ""):
		return fmt.Errorf("%w: compensate is a command (argv) or a tool call (server, tool), not both", ErrInvalid)
	case c.IsCommand():
		return validArgv(c.Argv)
	case !serverName.MatchString(c.Server):
		return fmt.Errorf("%w: compensate: server %q is not 1 to 64 of A-Z a-z 0-9 . _ - (a gate's name)", ErrInvalid, clip(c.Server))
	case c.Tool == "" || len(c.Tool) > MaxNameLength || !printable(c.Tool):
		return fmt.Errorf("%w: compensate: tool must be 1 to %d printable bytes", ErrInvalid, MaxNameLength)
	case c.Arguments == "":
		return nil
	case len(c.Arguments) > MaxArgumentBytes:
		return fmt.Errorf("%w: compensate: arguments are %d bytes, more than %d", ErrInvalid, len(c.Arguments), MaxArgumentBytes)
	}
	if err := strictjson.Check([]byte(c.Arguments)); err != nil {
		return fmt.Errorf("%w: compensate: arguments: %v", ErrInvalid, err)
	}
	if trimmed := bytes.TrimLeft([]byte(c.Arguments), " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: compensate: arguments must be a JSON object", ErrInvalid)
	}
	return nil
}

func validArgv(argv []string) error {
	if len(argv) > MaxArgv || argv[0] == "" {
		return fmt.Errorf("%w: compensate: argv must have 1 to %d arguments, the first not empty", ErrInvalid, MaxArgv)
	}
	for i, a := range argv {
		if len(a) > MaxNameLength || !utf8.ValidString(a) || bytes.IndexByte([]byte(a), 0) >= 0 {
			return fmt.Errorf("%w: compensate: argv[%d] must be valid UTF-8 without NUL, at most %d bytes", ErrInvalid, i, MaxNameLength)
		}
	}
	return nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
