package policy

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
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
	// File is the file of a directory the note is about (ParseAgentsDir);
	// empty for a single file.
	File string
	Line int
	Text string
}

func (n AgentsMDNote) String() string {
	switch {
	case n.File != "" && n.Line == 0:
		return fmt.Sprintf("%s: %s", n.File, n.Text)
	case n.File != "":
		return fmt.Sprintf("%s: line %d: %s", n.File, n.Line, n.Text)
	}
	return fmt.Sprintf("line %d: %s", n.Line, n.Text)
}

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
	p, notes, err := readAgentsMD(data, name, mcpServer)
	if err != nil {
		return p, notes, err
	}
	return p, notes, checkImported(p, "AGENTS.md")
}

// readAgentsMD reads the rules of one file, unchecked.
func readAgentsMD(data []byte, name, mcpServer string) (Policy, []AgentsMDNote, error) {
	r := agentsMDReader{policy: Policy{Name: name, SignalOnViolation: true}, mcpServer: mcpServer}
	if len(data) > MaxAgentsMD {
		return r.policy, nil, invalid("AGENTS.md: %d bytes, more than %d", len(data), MaxAgentsMD)
	}
	if !utf8.Valid(data) {
		return r.policy, nil, invalid("AGENTS.md is not UTF-8")
	}
	for i, raw := range bytes.Split(data, []byte("\n")) {
		if err := r.readLine(i+1, strings.TrimRight(string(raw), "\r")); err != nil {
			return r.policy, r.notes, err
		}
	}
	return r.policy, r.notes, nil
}

// checkImported validates an imported policy, which must state a rule.
func checkImported(p Policy, from string) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if !p.statesRules() {
		return invalid("%s states no rules: no list item under a blocked actions, blocked patterns or allowed tools heading", from)
	}
	return nil
}

// statesRules reports whether p blocks or allows anything by name or
// pattern (what an import must bring).
func (p Policy) statesRules() bool {
	return len(p.BlockedActions)+len(p.BlockedPatterns)+len(p.AllowedTools) > 0
}

// MaxAgentsDirFiles bounds the Markdown files ParseAgentsDir reads.
const MaxAgentsDirFiles = 64

// ParseAgentsDir reads a directory of agent instructions, as seed 002's
// parse_directory(".agents/") does: every Markdown file (*.md, any case)
// at its top level, in name order, each read as ParseAgentsMD reads one
// file, their rules merged into the one policy name (each rule once, in
// the order first met). A file that states no rule is noted, not an
// error; the directory as a whole must state one. Notes name their file.
func ParseAgentsDir(dir fs.FS, name, mcpServer string) (Policy, []AgentsMDNote, error) {
	merged := Policy{Name: name, SignalOnViolation: true}
	entries, err := fs.ReadDir(dir, ".")
	if err != nil {
		return merged, nil, err
	}
	var notes []AgentsMDNote
	files := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.EqualFold(path.Ext(e.Name()), ".md") {
			continue
		}
		if files++; files > MaxAgentsDirFiles {
			return merged, notes, invalid("the directory holds more than %d Markdown files", MaxAgentsDirFiles)
		}
		data, err := readBounded(dir, e.Name())
		if err != nil {
			return merged, notes, err
		}
		p, fileNotes, err := readAgentsMD(data, name, mcpServer)
		for _, n := range fileNotes {
			n.File = e.Name()
			notes = append(notes, n)
		}
		if err != nil {
			return merged, notes, fmt.Errorf("%s: %w", e.Name(), err)
		}
		if !p.statesRules() {
			notes = append(notes, AgentsMDNote{File: e.Name(), Text: "states no rules"})
		}
		merged.BlockedActions = appendNew(merged.BlockedActions, p.BlockedActions)
		merged.BlockedPatterns = appendNew(merged.BlockedPatterns, p.BlockedPatterns)
		merged.AllowedTools = appendNew(merged.AllowedTools, p.AllowedTools)
	}
	if files == 0 {
		return merged, notes, invalid("the directory holds no Markdown file (*.md)")
	}
	return merged, notes, checkImported(merged, "the directory")
}

// readBounded reads the file name of dir, refusing one larger than
// MaxAgentsMD without reading it whole.
func readBounded(dir fs.FS, name string) ([]byte, error) {
	f, err := dir.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxAgentsMD+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxAgentsMD {
		return nil, invalid("%s: more than %d bytes", name, MaxAgentsMD)
	}
	return data, nil
}

// appendNew appends to list each item of more it does not hold yet.
func appendNew(list, more []string) []string {
	for _, s := range more {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

// agentsMDReader is ParseAgentsMD's state as it reads the file line by
// line: the policy and notes so far, and where in the document it is.
type agentsMDReader struct {
	policy    Policy
	notes     []AgentsMDNote
	mcpServer string
	section   string // "" before any section but the title, "-" in one not imported, else a value of agentsMDSections
	fenced    bool   // inside a fenced code block
}

func (r *agentsMDReader) note(line int, format string, args ...any) {
	r.notes = append(r.notes, AgentsMDNote{Line: line, Text: fmt.Sprintf(format, args...)})
}

func (r *agentsMDReader) inRuleSection() bool { return r.section != "" && r.section != "-" }

// readLine reads line n: a code fence, a heading, or in a rule section a
// list item; an error ends the reading.
func (r *agentsMDReader) readLine(n int, line string) error {
	if mdFence.MatchString(line) {
		r.fenced = !r.fenced
		if r.inRuleSection() {
			r.note(n, "a code block in a rule section is not read; list each rule as an item")
		}
		return nil
	}
	if r.fenced {
		return nil
	}
	if m := mdHeading.FindStringSubmatch(line); m != nil {
		r.heading(n, len(m[1]), m[2])
		return nil
	}
	if !r.inRuleSection() || strings.TrimSpace(line) == "" {
		return nil
	}
	m := mdListItem.FindStringSubmatch(line)
	if m == nil {
		r.note(n, "not a list item, not imported: %q", strings.TrimSpace(line))
		return nil
	}
	value := strings.TrimSpace(m[1])
	if c := mdCode.FindStringSubmatch(value); c != nil {
		value = c[1]
	}
	if value == "" {
		return nil
	}
	return r.item(n, value)
}

// heading enters the section a heading of the given level and text opens.
func (r *agentsMDReader) heading(n, level int, text string) {
	kind, known := agentsMDSections[headingKey(text)]
	switch {
	case known:
		r.section = kind
	case level == 1 && r.section == "":
		r.section = "" // the document's title
	default:
		r.section = "-"
		r.note(n, "section %q is not a rule section (blocked actions, blocked patterns, allowed tools); not imported", strings.TrimSpace(text))
	}
}

// item adds the value of the list item on line n to the rule of its
// section.
func (r *agentsMDReader) item(n int, value string) error {
	switch r.section {
	case "actions":
		r.blockedAction(n, value)
	case "patterns":
		if _, _, err := compilePattern(value); err != nil {
			return invalid("AGENTS.md line %d: blocked pattern: %v", n, err)
		}
		r.policy.BlockedPatterns = appendOnce(r.policy.BlockedPatterns, value)
	case "tools":
		return r.allowedTool(n, value)
	}
	return nil
}

// blockedAction adds a blocked action: a bare name that is not an action
// type is the server's tool when a server is given.
func (r *agentsMDReader) blockedAction(n int, value string) {
	if r.mcpServer != "" && !strings.Contains(value, "/") && !isActionType(value) {
		r.note(n, "blocked action %q is taken as the tool mcp/%s/%s", value, r.mcpServer, value)
		value = "mcp/" + r.mcpServer + "/" + value
	}
	r.policy.BlockedActions = appendOnce(r.policy.BlockedActions, value)
}

// allowedTool adds an allowed tool: a bare name is the server's tool, and
// an error when no server is given.
func (r *agentsMDReader) allowedTool(n int, value string) error {
	if !strings.Contains(value, "/") {
		if r.mcpServer == "" {
			return invalid("AGENTS.md line %d: allowed tool %q names no server: write mcp/<server>/%s, or give the server's name", n, value, value)
		}
		r.note(n, "allowed tool %q is taken as mcp/%s/%s", value, r.mcpServer, value)
		value = "mcp/" + r.mcpServer + "/" + value
	}
	if !allowedTool.MatchString(value) {
		return invalid("AGENTS.md line %d: allowed tool %q is not mcp/<server>/<tool>", n, value)
	}
	r.policy.AllowedTools = appendOnce(r.policy.AllowedTools, value)
	return nil
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
