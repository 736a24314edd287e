//go:build race

package verifier

// raceEnabled: the race detector slows crypto and scheduling ~10x, so the
// exhaustive tests sample under it (.ci/run also runs them whole without it).
const raceEnabled = true
