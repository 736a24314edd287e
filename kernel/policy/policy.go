package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"

	"github.com/annal-dev/annal/internal/strictjson"
)

// Limits of one policy.
const (
	MaxPolicySize     = 64 << 10
	MaxBlockedActions = 256
	MaxActionSize     = 256
	MaxPatterns       = 64
	MaxPatternSize    = 512
	MaxAllowedTools   = 256
	// MaxCallsPerMinuteLimit bounds a policy's max_calls_per_minute.
	MaxCallsPerMinuteLimit = 1_000_000
)

// ErrInvalidPolicy is wrapped by every error Parse, Validate and Compile
// return about a malformed policy.
var ErrInvalidPolicy = errors.New("invalid policy")

// Policy is a named set of rules (the seed's DEFAULT_POLICIES entries).
type Policy struct {
	Name            string   `json:"name"`
	BlockedActions  []string `json:"blocked_actions"`
	BlockedPatterns []string `json:"blocked_patterns"`
	// AuditAll asks the kernel to record every action the policy sees,
	// blocked or not.
	AuditAll bool `json:"audit_all"`
	// SignalOnViolation asks the kernel to terminate an agent whose action
	// this policy blocks (seed 002: "If ANY check fails → SIGKILL"). When
	// false a violation only denies. Parse, ParseAgentsMD and Defaults set
	// it unless the policy says "signal_on_violation": false; the zero
	// Policy built in Go leaves it off.
	SignalOnViolation bool `json:"signal_on_violation"`
	// AllowedTools lists MCP tools as targets mcp/<server>/<tool>: for each
	// server named, an action on any other mcp/<server>/... target is blocked
	// (AGENTS.md's "tools to allow"). Servers not named are not affected.
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// MaxCallsPerMinute, if not zero, bounds the requests an agent bound by
	// the policy makes: at most this many in any minute (seed 002's
	// "max_calls_per_minute"), a token bucket of this burst refilled at
	// this many a minute. Like the rings' rate limits it is checked live,
	// when a request is decided, and a request over it is refused with
	// RateLimitExceeded and not logged.
	MaxCallsPerMinute int `json:"max_calls_per_minute,omitempty"`
}

// allowedTool matches an allowed tool: mcp/<server>/<tool>, each a
// non-empty segment of printable characters without '/'.
var allowedTool = regexp.MustCompile(`^mcp/([^/\x00-\x20\x7f]+)/([^/\x00-\x1f\x7f]+)$`)

var (
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	// flagsOff finds a flag group that clears flags, such as (?-i) or
	// (?s-i:x). It is a check on the text, so it also refuses the rare
	// patterns that hold "(?-" otherwise, in a class ("[(?-]") or after an
	// escaped parenthesis ("\(?-"): write those another way ("[-(?]",
	// "\(?\-"). The parsed tree cannot tell: RE2 drops the fold flag from
	// caseless classes.
	flagsOff = regexp.MustCompile(`\(\?[A-Za-z]*-`)
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidPolicy}, args...)...)
}

// Parse reads one policy from strict JSON (see the package comment and
// strictjson.Decode: member names exactly those of Policy, none unknown or
// twice) and validates it.
func Parse(data []byte) (Policy, error) {
	if len(data) > MaxPolicySize {
		return Policy{}, invalid("%d bytes, more than %d", len(data), MaxPolicySize)
	}
	var p Policy
	if err := strictjson.Decode(data, &p); err != nil {
		return Policy{}, invalid("%v", err)
	}
	// The seed's default where the policy does not say: a violation ends
	// the agent. strictjson has refused the key in any other spelling.
	var said struct {
		SignalOnViolation *bool `json:"signal_on_violation"`
	}
	if err := json.Unmarshal(data, &said); err == nil && said.SignalOnViolation == nil {
		p.SignalOnViolation = true
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// ValidName checks a policy name: ^[a-z][a-z0-9_-]{0,63}$.
func ValidName(name string) error {
	if !namePattern.MatchString(name) {
		return invalid("name %q does not match ^[a-z][a-z0-9_-]{0,63}$", name)
	}
	return nil
}

// Validate checks the policy's name, blocked actions and patterns (see the
// package comment). Its errors name the policy and the rule broken.
func (p Policy) Validate() error {
	if err := ValidName(p.Name); err != nil {
		return err
	}
	lists := p.lists()
	for _, l := range lists[:2] {
		if err := l.validate(p.Name); err != nil {
			return err
		}
	}
	if p.MaxCallsPerMinute < 0 || p.MaxCallsPerMinute > MaxCallsPerMinuteLimit {
		return invalid("policy %s: max_calls_per_minute %d is not 1 to %d (0 or absent: no bound)", p.Name, p.MaxCallsPerMinute, MaxCallsPerMinuteLimit)
	}
	return lists[2].validate(p.Name)
}

// list is one list of a policy as Validate checks it: at most max items,
// each passing check, none twice.
type list struct {
	item  string // "blocked action": what one item is called in errors
	items []string
	max   int
	check func(string) error
}

// lists are the policy's lists in the order Validate checks them.
func (p Policy) lists() []list {
	return []list{
		{"blocked action", p.BlockedActions, MaxBlockedActions, checkAction},
		{"blocked pattern", p.BlockedPatterns, MaxPatterns, func(pat string) error { _, _, err := compilePattern(pat); return err }},
		{"allowed tool", p.AllowedTools, MaxAllowedTools, checkAllowedTool},
	}
}

func (l list) validate(policy string) error {
	if len(l.items) > l.max {
		return invalid("policy %s: %d %ss, more than %d", policy, len(l.items), l.item, l.max)
	}
	seen := make(map[string]bool, len(l.items))
	for i, v := range l.items {
		if err := l.check(v); err != nil {
			return invalid("policy %s: %s %d: %v", policy, l.item, i+1, err)
		}
		if seen[v] {
			return invalid("policy %s: %s %d: %q given twice", policy, l.item, i+1, v)
		}
		seen[v] = true
	}
	return nil
}

// checkAllowedTool: an allowed tool is an action name of the form
// mcp/<server>/<tool>.
func checkAllowedTool(t string) error {
	if err := checkAction(t); err != nil {
		return err
	}
	if !allowedTool.MatchString(t) {
		return fmt.Errorf("%q is not mcp/<server>/<tool>", t)
	}
	return nil
}

func checkAction(a string) error {
	switch {
	case a == "":
		return fmt.Errorf("empty")
	case len(a) > MaxActionSize:
		return fmt.Errorf("%d bytes, more than %d", len(a), MaxActionSize)
	case !utf8.ValidString(a):
		return fmt.Errorf("%q is not UTF-8", a)
	}
	for _, r := range a {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%q holds the unprintable rune %U", a, r)
		}
	}
	return nil
}

// compilePattern compiles one blocked pattern with case folding on, and
// refuses what the package comment says Validate refuses. It returns the
// pattern's prefilter too (requiredLiterals).
func compilePattern(pat string) (*regexp.Regexp, [][]byte, error) {
	switch {
	case len(pat) > MaxPatternSize:
		return nil, nil, fmt.Errorf("%d bytes, more than %d", len(pat), MaxPatternSize)
	case !utf8.ValidString(pat):
		return nil, nil, fmt.Errorf("%q is not UTF-8", pat)
	case flagsOff.MatchString(pat):
		return nil, nil, fmt.Errorf("%q clears a flag with (?-...); patterns are always case-insensitive", pat)
	}
	full := "(?i)" + pat
	tree, err := syntax.Parse(full, syntax.Perl)
	if err != nil {
		return nil, nil, fmt.Errorf("%q does not compile as RE2: %v", pat, err)
	}
	if canBeEmpty(tree) {
		return nil, nil, fmt.Errorf("%q can match an empty run of text, so it would block payloads for where it matches rather than for what they contain", pat)
	}
	re, err := regexp.Compile(full)
	if err != nil {
		return nil, nil, fmt.Errorf("%q does not compile as RE2: %v", pat, err)
	}
	return re, requiredLiterals(tree), nil
}

// canBeEmpty reports whether re can match zero characters somewhere, taking
// every zero-width assertion (^, $, \A, \z, \b, \B) to hold.
func canBeEmpty(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpNoMatch, syntax.OpCharClass, syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return false
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	case syntax.OpCapture, syntax.OpPlus:
		return canBeEmpty(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min == 0 || canBeEmpty(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !canBeEmpty(sub) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if canBeEmpty(sub) {
				return true
			}
		}
		return false
	default:
		// OpEmptyMatch, OpStar, OpQuest and the zero-width assertions; an
		// operator unknown to this code counts as empty, so it is refused.
		return true
	}
}

// Defaults returns the seed's DEFAULT_POLICIES (read_only, no_pii, strict,
// audit), in that order, as fresh copies. Each terminates the agent that
// breaks it, as the seed's kernel does ("Policy Violation → SIGKILL").
func Defaults() []Policy {
	return []Policy{
		{
			Name:              "read_only",
			BlockedActions:    []string{"file_write", "database_write", "send_email", "api_call_write", "delete"},
			SignalOnViolation: true,
		},
		{
			Name:              "no_pii",
			BlockedPatterns:   []string{`\bssn\b`, `\bsocial.security\b`, `\bcredit.card\b`, `\bpassword\b`},
			SignalOnViolation: true,
		},
		{
			Name:           "strict",
			BlockedActions: []string{"shell_exec", "eval", "raw_sql"},
			BlockedPatterns: []string{
				`\bdrop\s+table\b`, `\bdelete\s+from\b`,
				`;\s*--`, `'\s*or\s*'1'\s*=\s*'1`,
			},
			SignalOnViolation: true,
		},
		{
			Name:              "audit",
			AuditAll:          true,
			SignalOnViolation: true, // blocks nothing, so it never fires; kept for one rule across the seed's policies
		},
	}
}
