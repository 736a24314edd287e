package policy

import (
	"fmt"
	"regexp"
	"slices"
)

// Rules a Violation names.
const (
	RuleBlockedAction  = "blocked_action"
	RuleBlockedPattern = "blocked_pattern"
	// RuleToolNotAllowed: a tool of an MCP server the policy lists allowed
	// tools of, and not one of them.
	RuleToolNotAllowed = "tool_not_allowed"
	// RuleMissingPolicy is Evaluate's answer to a nil policy: it fails
	// closed rather than skip it.
	RuleMissingPolicy = "missing_policy"
)

// Compiled is a validated policy ready to check actions. It is immutable.
type Compiled struct {
	policy   Policy
	actions  map[string]struct{}
	patterns []blockedPattern
	// tools: server -> its allowed tools (targets mcp/<server>/<tool>).
	tools map[string]map[string]bool
}

// blockedPattern is a compiled blocked pattern and its prefilter
// (prefilter.go; nil literals: none).
type blockedPattern struct {
	re       *regexp.Regexp
	literals [][]byte
}

// Compile validates p and compiles its patterns.
func Compile(p Policy) (*Compiled, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c := &Compiled{
		policy:  clonePolicy(p),
		actions: make(map[string]struct{}, len(p.BlockedActions)),
	}
	for _, a := range p.BlockedActions {
		c.actions[a] = struct{}{}
	}
	for _, pat := range p.BlockedPatterns {
		re, lits, err := compilePattern(pat)
		if err != nil { // Validate compiled it already.
			return nil, invalid("policy %s: %v", p.Name, err)
		}
		c.patterns = append(c.patterns, blockedPattern{re: re, literals: lits})
	}
	for _, t := range p.AllowedTools {
		m := allowedTool.FindStringSubmatch(t)
		if c.tools == nil {
			c.tools = map[string]map[string]bool{}
		}
		if c.tools[m[1]] == nil {
			c.tools[m[1]] = map[string]bool{}
		}
		c.tools[m[1]][m[2]] = true
	}
	return c, nil
}

func clonePolicy(p Policy) Policy {
	p.BlockedActions = slices.Clone(p.BlockedActions)
	p.BlockedPatterns = slices.Clone(p.BlockedPatterns)
	p.AllowedTools = slices.Clone(p.AllowedTools)
	return p
}

// Violation says which policy blocked an action and by which rule. Detail
// names the blocked action or the pattern, never the payload text the
// pattern matched: the violation is logged, and the match may be the very
// secret the policy guards.
type Violation struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	Detail string `json:"detail"`
}

// Error names the policy, the rule and the detail.
func (v *Violation) Error() string {
	return fmt.Sprintf("policy %s: %s: %s", v.Policy, v.Rule, v.Detail)
}

// Check returns the first rule of c that blocks an action going by
// actionNames with the given payload, or nil. Names come first, in the order
// given, each matched exactly and case-sensitively against the blocked
// actions and then against the allowed tools; then patterns, in the
// policy's order, case-insensitively on the payload bytes.
func (c *Compiled) Check(actionNames []string, payload []byte) *Violation {
	return c.check(actionNames, &foldedPayload{payload: payload}, true)
}

func (c *Compiled) check(actionNames []string, payload *foldedPayload, patterns bool) *Violation {
	for _, name := range actionNames {
		if _, blocked := c.actions[name]; blocked {
			return &Violation{Policy: c.policy.Name, Rule: RuleBlockedAction, Detail: fmt.Sprintf("action %q is blocked", name)}
		}
	}
	// Without a server's tools listed there is nothing to find, and the
	// regular expression is not run on every name.
	if c.tools != nil {
		for _, name := range actionNames {
			if m := allowedTool.FindStringSubmatch(name); m != nil {
				if allowed, listed := c.tools[m[1]]; listed && !allowed[m[2]] {
					return &Violation{Policy: c.policy.Name, Rule: RuleToolNotAllowed, Detail: fmt.Sprintf("tool %q is not among server %s's allowed tools", m[2], m[1])}
				}
			}
		}
	}
	for i, bp := range c.patterns {
		if patterns && payload.mayMatch(bp.literals) && bp.re.Match(payload.payload) {
			return &Violation{Policy: c.policy.Name, Rule: RuleBlockedPattern, Detail: fmt.Sprintf("payload matches pattern %q", c.policy.BlockedPatterns[i])}
		}
	}
	return nil
}

// Evaluate checks the policies in order and returns the first violation, or
// nil when none blocks. A nil entry is a RuleMissingPolicy violation.
func Evaluate(policies []*Compiled, actionNames []string, payload []byte) *Violation {
	return evaluate(policies, actionNames, payload, true)
}

// EvaluateNames is Evaluate without the patterns, for an action whose
// payload is not known (a sealed payload, after its subject's erasure):
// the rules that read names are judged, the ones that read the payload
// cannot be.
func EvaluateNames(policies []*Compiled, actionNames []string) *Violation {
	return evaluate(policies, actionNames, nil, false)
}

func evaluate(policies []*Compiled, actionNames []string, payload []byte, patterns bool) *Violation {
	folded := &foldedPayload{payload: payload}
	for i, c := range policies {
		if c == nil {
			return &Violation{Rule: RuleMissingPolicy, Detail: fmt.Sprintf("policy %d of %d is missing", i+1, len(policies))}
		}
		if v := c.check(actionNames, folded, patterns); v != nil {
			return v
		}
	}
	return nil
}
