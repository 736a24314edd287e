package ring

// RiskRange returns the range of risk weights of a reversibility level
// (§16.1): FULL [0.1, 0.3], PARTIAL [0.5, 0.8], NONE [0.9, 1.0]. Any other
// value is treated as NONE (fail closed).
func RiskRange(r Reversibility) (lo, hi float64) {
	switch r {
	case Full:
		return 0.1, 0.3
	case Partial:
		return 0.5, 0.8
	}
	return 0.9, 1.0
}

// RiskWeight returns the default risk weight of a reversibility level, the
// midpoint of its range (§16.2): FULL 0.2, PARTIAL 0.65, NONE 0.95. Any other
// value is treated as NONE.
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
