package ring

import "fmt"

// CheckResult is the outcome of a ring check (§6.2). Its JSON form uses the
// specification's field names. EffScore is recorded as given; Check does not
// decide on it.
type CheckResult struct {
	Allowed            bool       `json:"allowed"`
	RequiredRing       Ring       `json:"required_ring"`
	AgentRing          Ring       `json:"agent_ring"`
	EffScore           Score      `json:"eff_score"`
	Reason             string     `json:"reason"`
	RequiresConsensus  bool       `json:"requires_consensus"`
	RequiresSREWitness bool       `json:"requires_sre_witness"`
	DeniedResources    []Resource `json:"denied_resources"`
}

// Check decides whether an agent at ring agent may perform an action that
// requires ring required (§6.1), in this order:
//  1. required is Root: denied, RequiresSREWitness set. Root actions are
//     never available to agents through the standard API (§20.1).
//  2. either ring is invalid: denied (fail closed, §19.1). This comes before
//     the comparison because an invalid ring such as -1 would otherwise
//     compare as more privileged than any valid one.
//  3. agent is less privileged than required: denied; RequiresConsensus is
//     set when required is Privileged, since Privileged is reached with
//     consensus (§4.1).
//  4. otherwise: allowed.
//
// The Reason names the rule. DeniedResources is empty: resources are
// decided by Constraints.CheckUse.
func Check(agent Ring, required Ring, eff Score) CheckResult {
	res := CheckResult{RequiredRing: required, AgentRing: agent, EffScore: eff, DeniedResources: []Resource{}}
	switch {
	case required == Root:
		res.RequiresSREWitness = true
		res.Reason = "denied: the action requires ring 0 (root), which needs out-of-band SRE Witness attestation and is never granted to an agent (§6.1, §20.1)"
	case !required.Valid():
		res.Reason = fmt.Sprintf("denied: required ring %d is not a valid execution ring (fail closed, §19.1)", int(required))
	case !agent.Valid():
		res.Reason = fmt.Sprintf("denied: agent ring %d is not a valid execution ring (fail closed, §19.1)", int(agent))
	case required.MorePrivilegedThan(agent):
		res.RequiresConsensus = required == Privileged
		res.Reason = fmt.Sprintf("denied: agent at %v is less privileged than the %v the action requires (§6.1)", agent, required)
	default:
		res.Allowed = true
		res.Reason = allowedReason(agent, required)
	}
	return res
}

// allowedReasons are the reasons of the allowed checks, made once: every
// action of every fold is checked (the valid rings are 0 to 3).
var allowedReasons = func() (r [4][4]string) {
	for a := range r {
		for q := range r[a] {
			r[a][q] = fmt.Sprintf("allowed: agent at %v meets the %v the action requires (§6.1)", Ring(a), Ring(q))
		}
	}
	return r
}()

func allowedReason(agent, required Ring) string {
	if agent >= 0 && int(agent) < len(allowedReasons) && required >= 0 && int(required) < len(allowedReasons) {
		return allowedReasons[agent][required]
	}
	return fmt.Sprintf("allowed: agent at %v meets the %v the action requires (§6.1)", agent, required)
}
