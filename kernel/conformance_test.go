package kernel

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// conformance maps every test area of Execution Control 1.0 §21.2, and
// every worked example of §22, to the tests that cover it: in the pure
// package of the rule, and through the kernel's pipeline.
var conformance = map[string][]string{
	"§21.2 ring assignment from trust scores":    {"TestSpec4_1_ScoreBasedAssignment", "TestSpec22_1_RingAssignment", "TestSpec4_3_Demotion"},
	"§21.2 action classification to rings":       {"TestSpec5_2_RequiredRingDerivation", "TestSpec22_2_ActionClassification"},
	"§21.2 ring enforcement (allow/deny)":        {"TestSpec21_2_RingEnforcement", "TestSpec6_1_Ring0NeverAllowed", "TestSpec8_8_ChildNeverExceedsParent"},
	"§21.2 resource constraints per ring":        {"TestSpec21_2_ResourceConstraintEnforcement", "TestSpec7_ResourceConstraints", "TestAttack_AllowlistWildcard"},
	"§21.2 elevation approval and denial":        {"TestSpec21_2_ElevationApprovalAndDenial", "TestSpec22_3_ElevationDenial", "TestAttack_ElevationReplayAfterExpiry"},
	"§21.2 token consumption and exhaustion":     {"TestSpec21_2_TokenConsumptionAndExhaustion", "TestSpec22_4_RateLimitExhaustion", "TestAttack_RateLimitBypassWithManyIdentities"},
	"§21.2 session configuration validation":     {"TestSpec17_3_ConfigTypeMismatch", "TestSpec17_3_ConfigRange", "TestSpec17_3_SessionConfigValidation"},
	"§21.2 session isolation path checks":        {"TestSpec11_3_PathAccess", "TestSpec11_4_FailClosed", "TestSpec11_5_CrossSessionOnlyReadCommitted", "TestAttack_SessionPathTraversal"},
	"§21.2 kill switch operation, failure modes": {"TestSpec12_6_CallbackTimeout", "TestSpec12_6_CallbackPanic", "TestSpec12_6_NoCallback", "TestSpec12_KillSwitch", "TestSpec12_3_KillWithoutSubstituteCompensates"},
	"§21.2 audit hash chain":                     {"TestSpec14_4_ChainVerification", "TestSpec14_5_TamperDetection", "TestADR0023_DeltaChain"},
	"§21.2 identifier and config validation":     {"TestSpec21_2_IdentifierValidation", "TestSpec21_2_APIPathValidation", "TestSpec5_3_DescriptorValidation"},
	"§13 quarantine enforced at runtime":         {"TestSpec13_1_Reasons", "TestAttack_QuarantinedAgentThroughDelegatedEnvelope"},
	"§15 sagas":                                  {"TestSpec15_3_ReverseCompensation", "TestSpec15_3_SagaThroughTheKernel", "TestSpec15_2_Retries"},
	"replay reproduces control state":            {"TestReplayReproducesExecutionControlState"},
}

// TestSpec21_2_ConformanceIndex checks that every test the index names
// exists, so that the index cannot silently rot.
func TestSpec21_2_ConformanceIndex(t *testing.T) {
	have := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil {
				have[fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for area, tests := range conformance {
		for _, name := range tests {
			if !have[name] {
				t.Errorf("%s: test %s does not exist", area, name)
			}
		}
	}
}
