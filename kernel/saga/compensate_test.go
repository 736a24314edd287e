package saga

import (
	"errors"
	"strings"
	"testing"
)

// §15.3: a compensation Annal runs itself is a command or a tool call,
// never both, checked exactly.
func TestSpec004_15_3_CompensateValidate(t *testing.T) {
	good := []Compensate{
		{Argv: []string{"rm", "-f", "/tmp/x"}},
		{Server: "fs", Tool: "write_file", Arguments: `{"path":"/tmp/x","content":""}`},
		{Server: "fs", Tool: "list_allowed_directories"},
	}
	for _, c := range good {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	bad := map[string]Compensate{
		"nothing":             {},
		"both":                {Argv: []string{"true"}, Server: "fs", Tool: "t"},
		"empty command":       {Argv: []string{""}},
		"NUL in argv":         {Argv: []string{"echo", "a\x00b"}},
		"too many arguments":  {Argv: make([]string, MaxArgv+1)},
		"server name":         {Server: "f s", Tool: "t"},
		"no tool":             {Server: "fs"},
		"control in tool":     {Server: "fs", Tool: "a\nb"},
		"arguments not JSON":  {Server: "fs", Tool: "t", Arguments: `{"a":`},
		"arguments not an {}": {Server: "fs", Tool: "t", Arguments: `[1]`},
		"duplicate member":    {Server: "fs", Tool: "t", Arguments: `{"a":1,"a":2}`},
		"arguments too large": {Server: "fs", Tool: "t", Arguments: `{"a":"` + strings.Repeat("x", MaxArgumentBytes) + `"}`},
	}
	for name, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	sp := NewStepSpec("a", "x", "undo")
	sp.Compensate = &Compensate{Server: "fs"}
	if err := ValidateSteps([]StepSpec{sp}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "step a") {
		t.Errorf("a step with a bad compensate: %v", err)
	}
}
