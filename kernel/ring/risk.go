package ring

// RiskWeight returns the default risk weight of a reversibility level, the
// midpoint (§16.2) of its range of risk weights (§16.1): FULL 0.2 in
// [0.1, 0.3], PARTIAL 0.65 in [0.5, 0.8], NONE 0.95 in [0.9, 1.0]. Any other
// value is treated as NONE (fail closed).
func RiskWeight(r Reversibility) float64 {
	return float64(RiskWeightBasisPoints(r)) / 10000
}

// RiskWeightBasisPoints returns RiskWeight in basis points (2000, 6500,
// 9500), for events, which never carry floats.
func RiskWeightBasisPoints(r Reversibility) int {
	switch r {
	case Full:
		return 2000
	case Partial:
		return 6500
	}
	return 9500
}
