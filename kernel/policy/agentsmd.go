package policy

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxAgentsMD bounds an AGENTS.md file ParseAgentsMD reads.
const MaxAgentsMD = 1 << 20

// AgentsMDNote is something ParseAgentsMD did not turn into a rule, or
// turned into one in a way the person importing should see: an unknown
// section, a line in a rule section that is not a list item, a bare tool
// name given a server.
type AgentsMDNote struct {
	Line int
	Text string
}

func (n AgentsMDNote) String() string { return fmt.Sprintf("line %d: %s", n.Line, n.Text) }

// The rule sections of an AGENTS.md, by their headings (any level, case
// and punctuation ignored).
var agentsMDSections = map[string]string{
	"blocked actions": "actions", "forbidden actions": "actions", "disallowed actions": "actions", "actions to block": "actions",
	"blocked patterns": "patterns", "forbidden patterns": "patterns", "disallowed patterns": "patterns", "patterns to block": "patterns",
	"allowed tools": "tools", "tools to allow": "tools", "permitted tools": "tools", "tools allowed": "tools",
}

var (
	mdHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdListItem = regexp.MustCompile(`^\s*(?:[-*+]|\d{1,9}[.)])\s+(.*)$`)
	mdCode     = regexp.MustCompile("`([^`]+)`")
	mdFence    = regexp.MustCompile("^ {0,3}(```|~~~)")
)

// ParseAgentsMD reads the rules an AGENTS.md file states and returns them as
// the policy name: the list items under a "Blocked actions" heading become
// blocked_actions, under "Blocked patterns" blocked_patterns (RE2, as the
// policy engine reads them), under "Allowed tools" (or "Tools to allow")
// allowed_tools. An item's value is its first `code span`, else its text.
//
// Nothing is guessed. A section under any other heading is reported (a note)
// and not imported; so is a line in a rule section that is not a list item.
// A tool is mcp/<server>/<tool>; a bare tool name (no '/') becomes
// mcp/<mcpServer>/<name> when mcpServer is given (each such mapping is
// noted), and is an error otherwise. A bare name under blocked actions is
// mapped the same way when mcpServer is given, and kept as an action name
// (a type, a descriptor id, a target) otherwise. The policy is validated
// like any other: a pattern RE2 refuses is an error naming its line.
func ParseAgentsMD(data []byte, name, mcpServer string) (Policy, []AgentsMDNote, error) {
	p := Policy{Name: name}
	if len(data) > MaxAgentsMD {
		return p, nil, invalid("AGENTS.md: %d bytes, more than %d", len(data), MaxAgentsMD)
	}
	if !utf8.Valid(data) {
		return p, nil, invalid("AGENTS.md is not UTF-8")
	}
	var notes []AgentsMDNote
	note := func(line int, format string, args ...any) {
		notes = append(notes, AgentsMDNote{Line: line, Text: fmt.Sprintf(format, args...)})
	}
	section, fenced := "", false
	lines := bytes.Split(data, []byte("\n"))
	for i, raw := range lines {
		n, line := i+1, strings.TrimRight(string(raw), "\r")
		if mdFence.MatchString(line) {
			fenced = !fenced
			if section != "" && section != "-" {
				note(n, "a code block in a rule section is not read; list each rule as an item")
			}
			continue
		}
		if fenced {
			continue
		}
		if m := mdHeading.FindStringSubmatch(line); m != nil {
			title := headingKey(m[2])
			kind, known := agentsMDSections[title]
			switch {
			case known:
				section = kind
			case len(m[1]) == 1 && section == "":
				section = "" // the document's title
			default:
				section = "-"
				note(n, "section %q is not a rule section (blocked actions, blocked patterns, allowed tools); not imported", strings.TrimSpace(m[2]))
			}
			continue
		}
		if section == "" || section == "-" || strings.TrimSpace(line) == "" {
			continue
		}
		m := mdListItem.FindStringSubmatch(line)
		if m == nil {
			note(n, "not a list item, not imported: %q", strings.TrimSpace(line))
			continue
		}
		value := strings.TrimSpace(m[1])
		if c := mdCode.FindStringSubmatch(value); c != nil {
			value = c[1]
		}
		if value == "" {
			continue
		}
		switch section {
		case "actions":
			if mcpServer != "" && !strings.Contains(value, "/") && !isActionType(value) {
				note(n, "blocked action %q is taken as the tool mcp/%s/%s", value, mcpServer, value)
				value = "mcp/" + mcpServer + "/" + value
			}
			p.BlockedActions = appendOnce(p.BlockedActions, value)
		case "patterns":
			if _, _, err := compilePattern(value); err != nil {
				return p, notes, invalid("AGENTS.md line %d: blocked pattern: %v", n, err)
			}
			p.BlockedPatterns = appendOnce(p.BlockedPatterns, value)
		case "tools":
			if !strings.Contains(value, "/") {
				if mcpServer == "" {
					return p, notes, invalid("AGENTS.md line %d: allowed tool %q names no server: write mcp/<server>/%s, or give the server's name", n, value, value)
				}
				note(n, "allowed tool %q is taken as mcp/%s/%s", value, mcpServer, value)
				value = "mcp/" + mcpServer + "/" + value
			}
			if !allowedTool.MatchString(value) {
				return p, notes, invalid("AGENTS.md line %d: allowed tool %q is not mcp/<server>/<tool>", n, value)
			}
			p.AllowedTools = appendOnce(p.AllowedTools, value)
		}
	}
	if err := p.Validate(); err != nil {
		return p, notes, err
	}
	if len(p.BlockedActions)+len(p.BlockedPatterns)+len(p.AllowedTools) == 0 {
		return p, notes, invalid("AGENTS.md states no rules: no list item under a blocked actions, blocked patterns or allowed tools heading")
	}
	return p, notes, nil
}

// headingKey is a heading as agentsMDSections keys it: lower case, words
// of letters only.
func headingKey(h string) string {
	h = mdCode.ReplaceAllString(h, "$1")
	return strings.Join(strings.FieldsFunc(strings.ToLower(h), func(r rune) bool {
		return !(r >= 'a' && r <= 'z')
	}), " ")
}

func isActionType(s string) bool {
	return s == "observe" || s == "create" || s == "mutate" || s == "execute"
}

func appendOnce(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}
